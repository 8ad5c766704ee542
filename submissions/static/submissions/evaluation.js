// The submission page's extras on top of kbsite/live.js (which keeps #status, #progress and
// #verdict live):
// - while queued, the queue position is refreshed, since the submissions ahead finishing send
//   no event to this one;
// - once finished, the server-rendered evaluation (trials, timing, compiler output) is fetched
//   and put in the page.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var status = document.getElementById("status");
    var target = document.getElementById("evaluation");
    var live = document.getElementById("live-status");
    if (!status || !target || !live) { return; }
    function current() { return status.textContent.trim(); }

    function refreshPosition() {
      if (current() !== "queued") { return; }
      fetch(live.dataset.pollUrl, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (state) {
          var el = document.getElementById("queue-position");
          if (el && state.status === "queued" && state.queue_position) {
            el.textContent = "(position " + state.queue_position + " in the queue)";
          }
        })
        .catch(function () {})
        .then(function () { setTimeout(refreshPosition, 5000); });
    }
    setTimeout(refreshPosition, 5000);

    var loading = false;
    function load() {
      if (loading || current() !== "finished" || target.dataset.loaded) { return; }
      loading = true;
      fetch(target.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is our own server-rendered template, escaped there.
          target.innerHTML = html;
          target.dataset.loaded = "yes";
          loading = false;
        })
        .catch(function () { setTimeout(function () { loading = false; load(); }, 3000); });
    }
    new MutationObserver(load).observe(status, { childList: true, characterData: true, subtree: true });
    load();
  });
})();
