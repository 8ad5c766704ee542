// The code editor of the submit page and the competition entry form (CodeMirror 5, installed
// from npm by `make` and served from node_modules/: submissions.forms.CodeEditor). Each
// textarea[data-code-editor] becomes an editor with line numbers and Python highlighting. The
// textarea stays the form's field: the editor copies its text back on every change and when the
// form is submitted. Without CodeMirror (its files missing, or no JavaScript) the plain textarea
// is the editor, and the form works the same.
(function () {
  "use strict";

  function indentOrSpaces(cm) {
    if (cm.somethingSelected()) { cm.indentSelection("add"); return; }
    cm.replaceSelection(Array(cm.getOption("indentUnit") + 1).join(" "), "end");
  }

  function enhance(textarea) {
    if (!window.CodeMirror || textarea.dataset.editorReady) { return; }
    var editor = window.CodeMirror.fromTextArea(textarea, {
      mode: textarea.dataset.codeEditor || "python",
      lineNumbers: true,
      indentUnit: 4,
      tabSize: 4,
      indentWithTabs: false,
      // Tab indents; Esc then Tab leaves the editor (keyboard users are not trapped).
      extraKeys: { Tab: indentOrSpaces, "Shift-Tab": "indentLess", Esc: function (cm) {
        cm.getInputField().blur();
      } },
    });
    textarea.dataset.editorReady = "yes";
    editor.getWrapperElement().id = textarea.id + "-editor";
    editor.on("change", function () { editor.save(); });
    var label = textarea.id && document.querySelector("label[for='" + textarea.id + "']");
    if (label) {
      editor.getInputField().setAttribute("aria-label", label.textContent.replace(/:$/, ""));
      label.addEventListener("click", function (event) { event.preventDefault(); editor.focus(); });
    }
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("textarea[data-code-editor]"), enhance);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); }
  else { start(); }
})();
