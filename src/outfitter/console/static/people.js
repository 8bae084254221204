// The employees import: its check and import answer 422 with the rows' problems, which htmx would
// not swap in by default (an error status). The result region takes them like any other answer.
"use strict";
(function () {
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "import-result" && event.detail.xhr.status >= 400 && event.detail.xhr.status < 500) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
