// The console's own script: small, in a file (the CSP allows no inline script and no eval).
"use strict";
(function () {
  if (window.htmx) {
    // No eval of attribute expressions, no inline script in swapped content.
    htmx.config.allowEval = false;
    htmx.config.allowScriptTags = false;
    htmx.config.includeIndicatorStyles = false;
  }
  // Every request htmx sends carries the session's CSRF token (set here, not by an inherited
  // attribute: htmx 4 stops inheriting hx-headers).
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) {
      event.detail.headers["X-CSRF-Token"] = meta.getAttribute("content");
    }
  });
  // After a swap, focus the new content's heading so keyboard and screen-reader users land on it.
  document.addEventListener("htmx:afterSwap", function (event) {
    var heading = event.detail.target.querySelector("h1, h2");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
  });
})();
