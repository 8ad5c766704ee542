// The starter picker (templates/_starter_picker.html) and its form's own problem and backend
// selects name one choice twice, on the submit page and on a competition's entry form. Kept in
// step here, so that the code in the editor is never the starter of another problem than the
// one the form submits to:
// - choosing a problem or a backend in either chooses the same in the other;
// - then the code, while it is still the starter the page put there (no one has edited it),
//   becomes the new choice's starter, fetched from the API (GET /api/v1/problems/<slug>/
//   starter/). Code someone edited is theirs and stays: a note says which problem's starter it
//   began as, and "Load the starter" replaces it, as without JavaScript.
// The picker names a problem by slug and the form by pk: #starter-problems (JSON the server
// writes) pairs them, with each one's starter URL.
// Without JavaScript the two selects are as the server rendered them, in step at every load.
(function () {
  "use strict";

  function hasOption(select, value) {
    return Array.prototype.some.call(select.options, function (o) { return o.value === value; });
  }

  function start() {
    var picker = document.getElementById("starter-form");
    var form = picker && picker.dataset.form && document.getElementById(picker.dataset.form);
    if (!form) { return; }
    var pickProblem = picker.querySelector("select[name=problem]");
    var pickBackend = picker.querySelector("select[name=backend]");
    var formProblem = form.querySelector("select[name=problem]");
    var formBackend = form.querySelector("select[name=backend]");
    var code = form.querySelector("textarea[name=source]");
    var note = document.getElementById("starter-note");
    var data = document.getElementById("starter-problems");
    if (!pickProblem || !formProblem || !code || !data) { return; }
    var bySlug = {};
    var slugOfPk = {};
    JSON.parse(data.textContent).forEach(function (p) {
      bySlug[p.slug] = p;
      slugOfPk[p.pk] = p.slug;
    });

    // The starter last put in the code, and the problem it is for: code equal to it (or empty)
    // is untouched, and follows the form's problem. The server says whether the page's code is
    // a starter (data-starter-for); else it is the user's (a form sent back with an error).
    var loadedFor = picker.getAttribute("data-starter-for");
    var starter = { text: loadedFor ? code.value : "", slug: loadedFor || "" };
    var asked = 0;  // the latest request: an older answer arriving late is dropped

    function formSlug() {
      return slugOfPk[formProblem.value] || "";
    }

    function untouched() {
      return code.value === starter.text || code.value.trim() === "";
    }

    // The editor (code-editor.js's CodeMirror) where it loaded, else the plain textarea.
    function setCode(text) {
      var wrapper = document.getElementById(code.id + "-editor");
      if (wrapper && wrapper.CodeMirror) { wrapper.CodeMirror.setValue(text); }
      code.value = text;
    }

    function say(text) {
      if (!note) { return; }
      note.textContent = text;
      note.hidden = !text;
    }

    function loadStarter() {
      var slug = formSlug();
      if (!bySlug[slug]) { return; }
      if (!untouched()) {
        say(!starter.slug || slug === starter.slug ? "" : "The code below began as the " +
            "starter of " + starter.slug + ", not of " + slug + ": load " + slug +
            "'s starter to start over.");
        return;
      }
      var backend = pickBackend ? pickBackend.value : "";
      var mine = ++asked;
      fetch(bySlug[slug].starter + "?backend=" + encodeURIComponent(backend), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      }).then(function (response) {
        return response.json().then(function (body) { return { ok: response.ok, body: body }; });
      }).then(function (answer) {
        put(mine, slug, answer.ok ? answer.body.source : "",
            answer.ok ? "" : "No starter for " + slug + ": " + (answer.body.detail || ""));
      }).catch(function () {
        put(mine, slug, "", "The starter of " + slug + " could not be loaded.");
      });
    }

    // Where there is no starter (its reference not public, not in this backend, or the request
    // failed), the other problem's starter goes all the same: it must not be sent to this one.
    function put(mine, slug, text, why) {
      if (mine !== asked || !untouched()) { return; }
      setCode(text);
      starter = { text: text, slug: slug };
      say(why);
    }

    // Setting a select's value sends no change event, so neither handler calls the other.
    pickProblem.addEventListener("change", function () {
      var chosen = bySlug[pickProblem.value];
      if (chosen && hasOption(formProblem, chosen.pk)) { formProblem.value = chosen.pk; }
      loadStarter();
    });
    if (pickBackend && formBackend) {
      pickBackend.addEventListener("change", function () {
        if (hasOption(formBackend, pickBackend.value)) { formBackend.value = pickBackend.value; }
        loadStarter();
      });
      formBackend.addEventListener("change", function () {
        if (!hasOption(pickBackend, formBackend.value)) { return; }
        pickBackend.value = formBackend.value;
        loadStarter();
      });
    }
    formProblem.addEventListener("change", function () {
      var slug = formSlug();
      if (slug && hasOption(pickProblem, slug)) { pickProblem.value = slug; }
      loadStarter();
    });
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); }
  else { start(); }
})();
