// Copy buttons of the Integrations pages (a token, a secret, a value for the identity provider).
// In a file: the CSP allows no inline script. Without script the buttons stay hidden and the value
// is plain text to select.
"use strict";
(function () {
  function say(button, words) {
    button.textContent = words;
    window.setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    if (!navigator.clipboard) {
      return;
    }
    button.hidden = false;
    button.setAttribute("aria-live", "polite");
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source) {
        return;
      }
      navigator.clipboard.writeText(source.textContent.trim()).then(
        function () { say(button, "Copied"); },
        function () { say(button, "Select and copy it"); }
      );
    });
  });
})();
