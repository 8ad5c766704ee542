// Stored values as people read them, the same as the `human` template filter
// (kbsite/templatetags/kbsite_tags.py): "compile_error" -> "compile error", "cuda" -> "CUDA".
(function () {
  "use strict";
  var LABELS = { cuda: "CUDA", cpp: "C++", triton: "Triton", torch: "PyTorch" };
  window.kbLabel = function (value) {
    if (value === null || value === undefined) { return ""; }
    var text = String(value);
    return LABELS[text.toLowerCase()] || text.replace(/_/g, " ");
  };
})();
