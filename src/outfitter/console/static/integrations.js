// Copy buttons of the Integrations pages (a token, a secret, a value for the identity provider).
// In a file: the CSP allows no inline script. Without script the buttons stay hidden and the value
// is plain text to select.
"use strict";
(function () {
  // The outcome goes to the status beside the button (read out by screen readers); the button's
  // own name stays what it shows.
  function say(button, words) {
    var status = button.nextElementSibling;
    if (status && status.classList.contains("copy-status")) {
      status.textContent = words;
      window.setTimeout(function () { status.textContent = ""; }, 4000);
    }
  }
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    if (!navigator.clipboard) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source) {
        return;
      }
      navigator.clipboard.writeText(source.textContent.trim()).then(
        function () { say(button, "Copied."); },
        function () { say(button, "Not copied: select the text and copy it."); }
      );
    });
  });
})();
