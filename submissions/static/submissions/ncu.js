// The Nsight Compute part of the submission page: while a report is queued or running, the
// server-rendered part is fetched again every few seconds until it is done.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var section = document.getElementById("ncu");
    if (!section) { return; }
    function open() {
      var part = document.getElementById("ncu-part");
      return part && part.dataset.open === "1";
    }
    function refresh() {
      if (!open()) { return; }
      fetch(section.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { section.innerHTML = html; })  // our own escaped template
        .catch(function () {})
        .then(function () { setTimeout(refresh, 3000); });
    }
    setTimeout(refresh, 3000);
  });
})();
