// Live updates for submission pages and boards: a websocket first, polling as the fallback.
(function () {
  "use strict";

  function wsUrl(path) {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + window.location.host + path;
  }

  function fmtMs(v) { return v === null || v === undefined ? "–" : Number(v).toPrecision(4) + " ms"; }
  function fmtX(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(2) + "×"; }
  function setText(id, text) { var el = document.getElementById(id); if (el) { el.textContent = text; } }

  function connect(path, onMessage, onGiveUp) {
    var socket;
    try { socket = new WebSocket(wsUrl(path)); } catch (e) { onGiveUp(); return; }
    var opened = false;
    socket.onopen = function () { opened = true; };
    socket.onmessage = function (event) { onMessage(JSON.parse(event.data)); };
    socket.onclose = function () {
      // Reconnect after a drop; fall back to polling when websockets do not work at all.
      if (opened) { setTimeout(function () { connect(path, onMessage, onGiveUp); }, 2000); }
      else { onGiveUp(); }
    };
  }

  function renderSubmission(state) {
    if (!state || !state.status) { return; }
    setText("status", state.status);
    setText("queue-position", state.queue_position ? "(position " + state.queue_position + " in the queue)" : "");
    var p = state.progress || {};
    var progress = "";
    if (state.status === "running") {
      if (p.type === "trial") { progress = "checking trial " + p.k + " of " + p.n; }
      else if (p.phase) { progress = p.phase; }
    }
    setText("progress", progress);
    var verdict = document.getElementById("verdict");
    if (verdict && state.verdict) {
      verdict.textContent = state.verdict;
      verdict.className = "verdict " + state.verdict;
    }
    var ev = state.evaluation;
    var summary = document.getElementById("result-summary");
    if (ev && summary && state.status === "finished") {
      summary.textContent = "";
      var table = document.createElement("table");
      [["Candidate median", fmtMs(ev.candidate_ms)], ["Reference median", fmtMs(ev.reference_ms)],
       ["Speedup", fmtX(ev.speedup)], ["Flags", (ev.flags || []).join(", ")], ["Error", ev.error || ""]]
        .forEach(function (row) {
          if (!row[1]) { return; }
          var tr = table.insertRow();
          var th = document.createElement("th"); th.textContent = row[0]; tr.appendChild(th);
          var td = tr.insertCell(); td.textContent = row[1];
        });
      summary.appendChild(table);
    }
  }

  function startSubmission(section) {
    var polling = false;
    function poll() {
      fetch(section.dataset.pollUrl, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (state) {
          renderSubmission(state);
          if (state.status !== "finished") { setTimeout(poll, 2000); }
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    connect(section.dataset.wsPath, renderSubmission, function () {
      if (!polling) { polling = true; poll(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var section = document.getElementById("live-status");
    if (section) { startSubmission(section); }
  });
})();
