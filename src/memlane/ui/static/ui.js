// memlane ui: the page's one hand-written script (no build step, no dependency but htmx).
// Times come from the server in UTC (each <time> keeps it in its title, shown on hover);
// this writes them in the reader's local time.
(function () {
  "use strict";
  function localTimes(root) {
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      el.textContent = when.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit",
      });
      el.removeAttribute("data-local");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(document); });
  // "/" jumps to the page's query field (search), as on many sites; Escape leaves it
  document.addEventListener("keydown", function (event) {
    var field = document.querySelector("input[name=q]");
    var typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (event.key === "/" && field && !typing) { event.preventDefault(); field.focus(); field.select(); }
    if (event.key === "Escape" && document.activeElement === field) { field.blur(); }
  });
  // htmx swapped new content in: its times too
  document.addEventListener("htmx:afterSettle", function (event) { localTimes(event.target); });
})();
