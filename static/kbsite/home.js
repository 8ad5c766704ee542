// The start page's recent results stay current: the rows are fetched again (rendered by the
// server, escaped there) every 10 s while the page is visible.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("recent-results");
    if (!table || !table.dataset.fragmentUrl || !table.tBodies.length) { return; }
    var body = table.tBodies[0];
    var last = body.innerHTML.trim();
    function refresh() {
      if (document.hidden) { setTimeout(refresh, 10000); return; }
      fetch(table.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          html = html.trim();
          if (html && html !== last) { body.innerHTML = html; last = html; }
        })
        .catch(function () {})
        .then(function () { setTimeout(refresh, 10000); });
    }
    setTimeout(refresh, 10000);
  });
})();
