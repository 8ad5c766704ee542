// The submission page's extras on top of kbsite/live.js (which keeps #status, #progress and
// #verdict live):
// - while queued, the queue position is refreshed, since the submissions ahead finishing send
//   no event to this one;
// - once finished, the server-rendered evaluation (ranking, re-verification, trials, timing,
//   compiler output) is fetched and put in the page, and fetched again when a later event
//   carries another evaluation (a re-verification's replaced the first), so that the summary
//   above and the evaluation below always show the same one.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var status = document.getElementById("status");
    var target = document.getElementById("evaluation");
    var live = document.getElementById("live-status");
    if (!status || !target || !live) { return; }
    // The stored status (the badge may read "re-verifying" for a finished one).
    function current() { return status.dataset.status || status.textContent.trim(); }

    function refreshPosition() {
      if (current() !== "queued") { return; }
      fetch(live.dataset.pollUrl, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (state) {
          var el = document.getElementById("queue-position");
          if (el && state.status === "queued" && state.queue_text) {
            el.textContent = "(" + state.queue_text + ")";
          }
        })
        .catch(function () {})
        .then(function () { setTimeout(refreshPosition, 5000); });
    }
    setTimeout(refreshPosition, 5000);

    var loading = false;
    var wanted = null;  // the evaluation id the latest event carried
    function load() {
      if (loading || current() !== "finished") { return; }
      if (target.dataset.loaded && (wanted === null || target.dataset.loaded === wanted)) { return; }
      loading = true;
      fetch(target.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is our own server-rendered template, escaped there.
          target.innerHTML = html;
          var shown = target.querySelector("[data-evaluation-id]");
          target.dataset.loaded = shown ? shown.dataset.evaluationId : "none";
          if (wanted === null) { wanted = target.dataset.loaded; }
          loading = false;
        })
        .catch(function () { setTimeout(function () { loading = false; load(); }, 3000); });
    }
    document.addEventListener("kb:submission-state", function (event) {
      var state = event.detail || {};
      if (state.status === "finished" && state.evaluation && state.evaluation.id) {
        wanted = String(state.evaluation.id);
        load();
      }
    });
    new MutationObserver(load).observe(status, { childList: true, characterData: true, subtree: true });
    load();
  });
})();
