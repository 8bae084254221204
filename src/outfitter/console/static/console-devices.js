// The devices pages' script: the CSV import's progress bar. The import answers a stream of
// "progress <rows>" lines while it reads the file, then "result" and the outcome's HTML.
"use strict";
(function () {
  function setUp(form) {
    if (form.hasAttribute("data-ready")) {
      return; // once, however many times the page's scripts run
    }
    form.setAttribute("data-ready", "");
    var box = document.getElementById("import-progress");
    var bar = document.getElementById("import-bar");
    var label = document.getElementById("import-progress-label");
    var result = document.getElementById("import-result");
    form.addEventListener("submit", function (event) {
      if (!window.fetch || !window.TextDecoder) {
        return; // an ordinary post: the page comes back with the outcome
      }
      event.preventDefault();
      var data = new FormData(form);
      var button = event.submitter;
      if (button && button.name) {
        data.set(button.name, button.value);
      }
      var importing = data.get("mode") === "import";
      var buttons = form.querySelectorAll("button");
      buttons.forEach(function (b) { b.disabled = true; });
      box.hidden = false;
      bar.value = 0;
      label.textContent = "Reading the rows";
      result.innerHTML = "";
      var total = 1;
      var text = "";
      var done = false;
      function finish(html) {
        done = true;
        bar.value = bar.max;
        label.textContent = "Done";
        var fragment = document.createRange().createContextualFragment(html);
        result.replaceChildren(fragment);
        buttons.forEach(function (b) { b.disabled = false; });
        var heading = result.querySelector("h2");
        if (heading) {
          heading.setAttribute("tabindex", "-1");
          heading.focus();
        }
      }
      function take(lines) {
        var marker = text.indexOf("result\n");
        var head = marker >= 0 ? text.slice(0, marker) : text.slice(0, text.lastIndexOf("\n") + 1);
        head.split("\n").forEach(function (line) {
          var parts = line.split(" ");
          if (parts[0] === "total") {
            total = parseInt(parts[1], 10) || 1;
            bar.max = total;
          } else if (parts[0] === "progress") {
            var rows = parseInt(parts[1], 10) || 0;
            bar.value = rows;
            label.textContent = rows >= total
              ? (importing ? "Checking and writing the devices" : "Checking the rows against your devices")
              : "Read " + rows + " of about " + total + " rows";
          }
        });
        return marker;
      }
      fetch(form.action, {
        method: "POST",
        body: data,
        credentials: "same-origin",
        headers: { "X-Console-Progress": "stream" }
      }).then(function (response) {
        if (!response.body || !response.ok) {
          return response.text().then(function (html) {
            var page = new DOMParser().parseFromString(html, "text/html");
            var main = page.querySelector("main");
            finish(main ? main.innerHTML : html);
          });
        }
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) {
              var marker = take();
              if (!done) {
                finish(marker >= 0 ? text.slice(marker + 7) : "<p class=\"error\">The import stopped: reload the page and try again.</p>");
              }
              return;
            }
            text += decoder.decode(chunk.value, { stream: true });
            take();
            return pump();
          });
        }
        return pump();
      }).catch(function () {
        finish("<p class=\"error\">The connection was lost: reload the page and check whether the devices were registered.</p>");
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form[data-progress-form]");
    if (form) {
      setUp(form);
    }
  });
})();
