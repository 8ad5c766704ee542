// Stored values as people read them, the same as the `human` template filter: the table comes
// from the page (kbsite_tags.label_table, read from the backends' executors), so there is one
// copy. "compile_error" -> "compile error", "cuda" -> "CUDA".
(function () {
  "use strict";
  var node = document.getElementById("kb-labels");
  var table = node ? JSON.parse(node.textContent) : { labels: {}, uncompiled: [] };
  window.kbLabel = function (value) {
    if (value === null || value === undefined) { return ""; }
    var text = String(value);
    return table.labels[text.toLowerCase()] || text.replace(/_/g, " ");
  };
  // Whether the backend's "compiling" step compiles anything (plain PyTorch only loads).
  window.kbCompiles = function (backend) {
    return table.uncompiled.indexOf(backend) < 0;
  };
})();
