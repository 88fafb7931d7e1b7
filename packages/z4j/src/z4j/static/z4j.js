// z4j dashboard: live refresh over server-sent events, relative times, copy buttons.
// Everything here is optional: pages are complete without it.
(function () {
  "use strict";

  function relative(date) {
    var s = (Date.now() - date.getTime()) / 1000, ahead = s < 0;
    s = Math.abs(s);
    if (s < 5) return "just now";
    var units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
    for (var i = 0; i < units.length; i++) {
      if (s >= units[i][0]) {
        var text = Math.floor(s / units[i][0]) + " " + units[i][1];
        return ahead ? "in " + text : text + " ago";
      }
    }
    return "just now";
  }

  function refreshTimes(root) {
    root.querySelectorAll("time[data-rel]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = relative(d);
    });
  }

  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  var busy = false, again = false;
  function refreshFragment() {
    var target = document.querySelector("[data-live-fragment]");
    if (!target) return;
    if (busy) { again = true; return; }
    busy = true;
    fetch(fragmentUrl(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        // Anything but our fragment (a sign-in page after the session ended): reload fully.
        if (!res.ok || res.headers.get("X-Z4J-Fragment") !== "1") { window.location.reload(); return null; }
        return res.text();
      })
      .then(function (html) {
        if (html === null) return;
        var open = Array.prototype.map.call(target.querySelectorAll("details[open]"), function (d) {
          return Array.prototype.indexOf.call(target.querySelectorAll("details"), d);
        });
        target.innerHTML = html;
        var all = target.querySelectorAll("details");
        open.forEach(function (i) { if (all[i]) all[i].open = true; });
        refreshTimes(target);
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refreshFragment(); }
      });
  }

  function connect() {
    var url = document.body.getAttribute("data-stream");
    if (!url || !window.EventSource) return;
    var live = document.getElementById("live");
    var source = new EventSource(url);
    source.addEventListener("open", function () { if (live) live.classList.add("on"); });
    source.addEventListener("error", function () { if (live) live.classList.remove("on"); });
    source.addEventListener("changed", refreshFragment);
  }

  function copyButtons() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-copy]");
      if (!button) return;
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source || !navigator.clipboard) return;
      navigator.clipboard.writeText(source.textContent).then(function () {
        var label = button.textContent;
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = label; }, 1500);
      });
    });
    document.addEventListener("submit", function (event) {
      var message = event.target.getAttribute("data-confirm");
      if (message && !window.confirm(message)) event.preventDefault();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshTimes(document);
    setInterval(function () { refreshTimes(document); }, 30000);
    copyButtons();
    connect();
  });
})();
