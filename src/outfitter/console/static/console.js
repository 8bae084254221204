// The console's own script: small, in a file (the CSP allows no inline script and no eval).
"use strict";
(function () {
  // htmx's settings (no eval, no inline script or style) are in the page's htmx-config meta tag,
  // read before htmx starts. The devices filter swaps <main> and pushes the view's URL.
  // Every request htmx sends carries the session's CSRF token (set here, not by an inherited
  // attribute: htmx 4 stops inheriting hx-headers).
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) {
      event.detail.headers["X-CSRF-Token"] = meta.getAttribute("content");
    }
  });
  // After a swap, focus the new content's heading so keyboard and screen-reader users land on it.
  document.addEventListener("htmx:afterSettle", function () {
    var heading = document.querySelector("main h1");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
  });
})();
