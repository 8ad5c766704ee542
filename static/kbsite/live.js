// Live updates for submission pages and boards: a websocket first, polling as the fallback.
(function () {
  "use strict";

  function wsUrl(path) {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + window.location.host + path;
  }

  // As the pages' own filters print them (kbsite_tags.ms: four significant digits, no trailing
  // zeros; times: two decimals), so that a number reads the same live and reloaded.
  function fmtMs(v) {
    return v === null || v === undefined ? "–" : String(Number(Number(v).toPrecision(4))) + " ms";
  }
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

  function label(v) { return window.kbLabel ? window.kbLabel(v) : (v || ""); }

  function seconds(total) {
    total = Math.max(0, total);
    if (total < 10) { return total.toFixed(1) + " s"; }
    var whole = Math.round(total);
    if (whole < 60) { return whole + " s"; }
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (whole < 3600) { return Math.floor(whole / 60) + " min " + pad(whole % 60) + " s"; }
    return Math.floor(whole / 3600) + " h " + pad(Math.floor(whole % 3600 / 60)) + " min";
  }

  // What the runner is doing, in words (as the page renders it): never blank while it runs.
  // Nothing is compiled for plain PyTorch (kbsite_tags.phase_label says the same).
  function progressText(state, backend) {
    var p = state.progress || {};
    if (state.status !== "running") { return ""; }
    if (p.type === "trial" && p.n) { return "trial " + p.k + " of " + p.n; }
    if (p.phase === "compiling" && window.kbCompiles && !window.kbCompiles(backend)) {
      return "loading";
    }
    if (p.phase) { return label(p.phase); }
    return "starting";
  }

  // Finished, and its ranking no longer pending a re-verification, or cancelled
  // (Submission.is_settled).
  function settled(state) {
    if (state.status === "cancelled") { return true; }
    return state.status === "finished" && !(state.ranking && state.ranking.state === "pending");
  }

  // "took" is the server's (submissions.selectors.submission_took): submitted to settled, the
  // queue wait apart, sent once the ranking is settled; until then a finished one shows none.
  var clock = { started: null, took: null, timer: null };
  function showElapsed(status) {
    var el = document.getElementById("elapsed");
    if (!el) { return; }
    if (status === "running" && clock.started) {
      el.textContent = "running for " + seconds((Date.now() - clock.started) / 1000);
    } else if (status === "finished" && clock.took) {
      el.textContent = clock.took;
    } else {
      el.textContent = "";
    }
  }

  function renderSubmission(state) {
    if (!state || !state.status) { return; }
    var status = document.getElementById("status");
    if (status) {
      // "finished" only once settled: until then its re-verification is running.
      var reverifying = state.status === "finished" && !settled(state);
      status.textContent = reverifying ? "re-verifying" : state.status;
      status.className = "badge " + (reverifying ? "running" : state.status);
      status.dataset.status = state.status;
    }
    if (state.status === "running" && !clock.started) { clock.started = Date.now(); }
    clock.took = state.took ? state.took.text : null;
    if (clock.timer === null && state.status === "running") {
      clock.timer = setInterval(function () {
        var now = document.getElementById("status");
        var shown = now ? (now.dataset.status || now.textContent) : "";
        showElapsed(shown);
        if (shown !== "running") { clearInterval(clock.timer); clock.timer = null; }
      }, 1000);
    }
    showElapsed(state.status);
    // The cancel button goes once it no longer waits or runs.
    var cancel = document.getElementById("cancel-form");
    if (cancel && state.status !== "queued" && state.status !== "running") { cancel.hidden = true; }
    // Position and estimate in words, from the server (submissions.selectors.queue_text).
    setText("queue-position", state.status === "queued" && state.queue_text ? "(" + state.queue_text + ")" : "");
    var section = document.getElementById("live-status");
    setText("progress", progressText(state, section ? section.dataset.backend : ""));
    var bar = document.getElementById("progress-bar");
    var p = state.progress || {};
    if (bar) {
      var trial = state.status === "running" && p.type === "trial" && p.n;
      bar.hidden = !trial;
      if (trial) { bar.max = p.n; bar.value = p.k; }
    }
    var verdict = document.getElementById("verdict");
    if (verdict && state.verdict) {
      verdict.textContent = label(state.verdict);
      verdict.className = "verdict " + state.verdict;
      verdict.dataset.verdict = state.verdict;
    }
    var ev = state.evaluation;
    var summary = document.getElementById("result-summary");
    if (ev && summary && state.status === "finished") {
      summary.textContent = "";
      var table = document.createElement("table");
      if (ev.ranked_figure) {
        // Said as the page renders it: whose figures these are, where a re-verification decided.
        table.createCaption().textContent = ev.ranked_figure;
        table.caption.id = "ranked-figure-caption";
      }
      // The rows and ids of the server-rendered table (templates/submissions/detail.html).
      [["Candidate median", fmtMs(ev.candidate_ms), "candidate-ms"],
       ["Reference median", fmtMs(ev.reference_ms), "reference-ms"],
       ["Speedup", fmtX(ev.speedup), "speedup"],
       ["Exploits", (ev.flags || []).map(label).join(", ")],
       ["Notes", (ev.notes || []).map(label).join(", ")]]
        .forEach(function (row) {
          if (!row[1]) { return; }
          var tr = table.insertRow();
          var th = document.createElement("th"); th.textContent = row[0]; tr.appendChild(th);
          // The error itself is in the evaluation below (submissions/evaluation.js loads it).
          var td = tr.insertCell();
          td.textContent = row[1];
          if (row[2]) { td.id = row[2]; }
        });
      summary.appendChild(table);
    }
    // For the page's other parts (submissions/evaluation.js reloads the evaluation shown).
    document.dispatchEvent(new CustomEvent("kb:submission-state", { detail: state }));
  }

  function startSubmission(section) {
    var polling = false;
    // The server's times where the page has them (Unix seconds), else when this page saw the
    // change.
    if (section.dataset.started) { clock.started = Number(section.dataset.started) * 1000 || null; }
    function poll() {
      fetch(section.dataset.pollUrl, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (state) {
          renderSubmission(state);
          // On until settled: a would-be record's ranking is pending its re-verification.
          if (!settled(state)) { setTimeout(poll, 2000); }
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
