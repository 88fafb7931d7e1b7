// strataplane console: refreshes the live part of a page when its event stream says the data
// changed, and keeps relative times fresh. Pages are complete without it.
(function () {
  "use strict";

  function relative(date) {
    var s = (Date.now() - date.getTime()) / 1000, ahead = s < 0;
    s = Math.abs(s);
    var units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
    for (var i = 0; i < units.length; i++) {
      if (s >= units[i][0]) {
        var text = Math.floor(s / units[i][0]) + " " + units[i][1];
        return ahead ? "in " + text : text + " ago";
      }
    }
    return "just now";
  }

  function freshTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var value = el.getAttribute("datetime");
      var date = value ? new Date(value) : null;
      if (date && !isNaN(date)) el.textContent = relative(date);
    });
  }

  var loading = false, pending = false;
  function reload() {
    var target = document.querySelector("[data-live-fragment]");
    if (!target) return;
    if (loading) { pending = true; return; }
    loading = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    fetch(url.toString(), { credentials: "same-origin" })
      .then(function (res) {
        // Not our fragment (the sign-in page after the session ended): load the page anew.
        if (!res.ok || res.headers.get("X-Console-Fragment") !== "1") {
          window.location.reload();
          return null;
        }
        return res.text();
      })
      .then(function (html) {
        if (html !== null) { target.innerHTML = html; freshTimes(target); }
      })
      .catch(function () {})
      .then(function () {
        loading = false;
        if (pending) { pending = false; reload(); }
      });
  }

  function listen() {
    var url = document.body.getAttribute("data-stream");
    if (!url || !window.EventSource) return;
    var badge = document.getElementById("live");
    var source = new EventSource(url);
    source.addEventListener("open", function () { if (badge) badge.classList.add("on"); });
    source.addEventListener("error", function () { if (badge) badge.classList.remove("on"); });
    source.addEventListener("changed", reload);
  }

  // The editor: the file's checks while one types, on the text not saved yet.
  function editor() {
    var form = document.querySelector("form[data-editor]");
    if (!form) return;
    var target = document.getElementById("check"), timer = null, asked = 0;
    function check() {
      var body = new URLSearchParams(new FormData(form)), mine = ++asked;
      fetch(form.getAttribute("data-check"), { method: "POST", body: body, credentials: "same-origin" })
        .then(function (res) { return res.ok ? res.text() : null; })
        .then(function (html) { if (html !== null && mine === asked) target.innerHTML = html; })
        .catch(function () {});
    }
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(check, 400);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    editor();
    freshTimes(document);
    setInterval(function () { freshTimes(document); }, 15000);
    listen();
  });
})();
