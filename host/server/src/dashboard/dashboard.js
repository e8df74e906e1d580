// agent-host dashboard: live updates and context meters. Every page reads
// without this script; with it, the list and the session page follow the
// server's events (GET /v1/events) and the list fills its context meters.
(function () {
  "use strict";
  var main = document.querySelector("main");
  if (!main) return;
  var session = main.getAttribute("data-session");
  var status = document.getElementById("live");

  function say(text) {
    if (status) status.textContent = text;
  }

  // Replaces the parts of the page marked data-live with their newest
  // version, fetched from the server as a whole page.
  var pending = null;
  function refresh() {
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var next = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live]").forEach(function (old) {
            var fresh = next.getElementById(old.id);
            if (fresh) old.replaceWith(fresh);
          });
          meters();
          say("updated " + new Date().toLocaleTimeString());
        })
        .catch(function (e) { say("update failed (" + e + ")"); });
    }, 250);
  }

  // Fills the list's meters from each session's context report.
  function meters() {
    document.querySelectorAll(".meter[data-context]").forEach(function (cell) {
      if (cell.getAttribute("data-filled")) return;
      cell.setAttribute("data-filled", "1");
      fetch(cell.getAttribute("data-context"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (report) {
          var used = report.tokens.total;
          var window_ = report.context_limit;
          var pct = Math.min(100, window_ ? (100 * used) / window_ : 0);
          var trigger = null;
          report.triggers.forEach(function (t) {
            if (t.name === "tokens" || t.name === "fraction") trigger = t;
          });
          var bar = cell.querySelector(".bar");
          var fill = cell.querySelector(".fill");
          fill.style.width = pct.toFixed(1) + "%";
          fill.className = "fill" + (pct >= 95 ? " full" : pct >= 75 ? " high" : "");
          bar.querySelectorAll(".mark").forEach(function (m) { m.remove(); });
          if (trigger && window_) {
            var mark = document.createElement("span");
            mark.className = "mark";
            mark.style.left = Math.min(100, (100 * trigger.limit) / window_).toFixed(1) + "%";
            mark.title = "compacts at " + trigger.limit + " tokens";
            bar.appendChild(mark);
          }
          var label = used.toLocaleString() + " / " + window_.toLocaleString() + " tokens";
          if (trigger) label += " · " + Math.round(trigger.percent) + "% of the compaction point";
          cell.querySelector("small").textContent = label;
          bar.setAttribute("aria-label", label);
        })
        .catch(function () { cell.querySelector("small").textContent = "unavailable"; });
    });
  }

  // The report form: a chosen file's text goes into the text box.
  var file = document.getElementById("report-file");
  var text = document.getElementById("report-text");
  if (file && text) {
    file.addEventListener("change", function () {
      if (!file.files || !file.files[0]) return;
      file.files[0].text().then(function (t) { text.value = t; say("read " + file.files[0].name); });
    });
  }

  meters();
  if (!window.EventSource) return;
  var url = "/v1/events" + (session ? "?session=" + encodeURIComponent(session) : "");
  var events = new EventSource(url);
  ["session_created", "session_saved", "session_updated", "session_deleted", "context_compacted", "state_changed"]
    .forEach(function (name) { events.addEventListener(name, refresh); });
  events.onopen = function () { say("live"); };
  events.onerror = function () { say("reconnecting…"); };
})();
