// Live progress of a Spark job page: polls the job's REST endpoint (data-progress-url) twice a second, updates the
// bar, stages, tasks and bytes, and reloads the page when the job has ended (the server renders the results).
(function () {
  "use strict";
  var box = document.querySelector("[data-progress-url]");
  if (!box) { return; }
  var url = box.getAttribute("data-progress-url");
  function set(field, text) {
    var el = box.querySelector('[data-field="' + field + '"]');
    if (el) { el.textContent = text; }
  }
  function size(n) {
    n = n || 0;
    var units = ["bytes", "KB", "MB", "GB", "TB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }
  function tick() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (job) {
        var p = job.progress || {};
        var bar = box.querySelector('[data-field="bar"]');
        if (bar) { bar.value = p.percent || 0; bar.textContent = (p.percent || 0) + "%"; }
        set("status", job.status);
        set("percent", (p.percent || 0) + "%");
        set("stages", (p.stages_done || 0) + " / " + (p.stages || 0) + " done");
        set("tasks", (p.tasks_done || 0) + " / " + (p.tasks_total || 0) + " done" +
            (p.tasks_active ? ", " + p.tasks_active + " running" : ""));
        set("bytes", size(p.bytes_scanned) + (p.bytes_total ? " of " + size(p.bytes_total) : ""));
        if (p.broker) { set("broker", p.broker + " (" + (p.brokers_done || 0) + " of " + (p.brokers || 1) + " done)"); }
        if (job.running) { setTimeout(tick, 500); } else { setTimeout(function () { window.location.reload(); }, 400); }
      })
      .catch(function () { setTimeout(tick, 2000); });
  }
  setTimeout(tick, 300);
})();
