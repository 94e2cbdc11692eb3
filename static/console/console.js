// Theme (light/dark, remembered in localStorage) and "select all" checkboxes. No dependencies.
(function () {
  "use strict";
  var KEY = "console-theme";
  var root = document.documentElement;
  var stored = null;
  try { stored = localStorage.getItem(KEY); } catch (e) { /* storage disabled */ }
  var prefersDark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  root.setAttribute("data-theme", stored || (prefersDark ? "dark" : "light"));

  document.addEventListener("click", function (ev) {
    var toggle = ev.target.closest && ev.target.closest("[data-theme-toggle]");
    if (toggle) {
      var next = root.getAttribute("data-theme") === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { localStorage.setItem(KEY, next); } catch (e) { /* storage disabled */ }
    }
  });
  document.addEventListener("change", function (ev) {
    var name = ev.target.getAttribute && ev.target.getAttribute("data-select-all");
    if (name) {
      var form = ev.target.form || document;
      form.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (box) {
        box.checked = ev.target.checked;
      });
    }
  });
})();
