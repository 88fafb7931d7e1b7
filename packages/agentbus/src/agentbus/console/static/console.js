// Live figures: the server pushes the tenant's counts as server-sent events; each element with
// data-count="<name>" shows the latest value. No library, no build step.
(function () {
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var source = new EventSource(url);
  source.addEventListener("counts", function (event) {
    var counts = JSON.parse(event.data);
    Object.keys(counts).forEach(function (name) {
      document.querySelectorAll('[data-count="' + name + '"]').forEach(function (el) {
        el.textContent = String(counts[name]);
      });
    });
    document.body.setAttribute("data-live-updated", String(Date.now()));
  });
})();
