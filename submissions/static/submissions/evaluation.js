// When the live status (kept up to date by kbsite/live.js) says "finished", fetch the
// server-rendered evaluation (trials, timing, compiler output) and put it in the page.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var status = document.getElementById("status");
    var target = document.getElementById("evaluation");
    if (!status || !target) { return; }
    var loading = false;
    function load() {
      if (loading || status.textContent.trim() !== "finished" || target.dataset.loaded) { return; }
      loading = true;
      fetch(target.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is our own server-rendered, escaped template.
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
