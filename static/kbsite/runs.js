// Live progress: poll the run's status while anything can still change.
(function () {
  "use strict";
  var section = document.getElementById("run-live");
  var url = section.dataset.pollUrl;

  function setText(id, text) { var el = document.getElementById(id); if (el) { el.textContent = text; } }
  function cell(row, text, className) {
    var td = document.createElement("td");
    if (className) { td.className = className; }
    if (text instanceof Node) { td.appendChild(text); } else { td.textContent = text; }
    row.appendChild(td);
    return td;
  }
  function link(href, text) { var a = document.createElement("a"); a.href = href; a.textContent = text; return a; }
  function fixed(v, digits) { return v === null || v === undefined ? "–" : Number(v).toFixed(digits); }

  function renderFastP(rows, table) {
    var body = document.querySelector("#" + (table || "run-fast-p") + " tbody");
    if (!body || !rows) { return; }
    body.textContent = "";
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.dataset.level = r.level;
      cell(tr, r.level); cell(tr, r.problems); cell(tr, r.correct);
      Object.keys(r).filter(function (k) { return k.indexOf("fast_") === 0; })
        .forEach(function (k) { cell(tr, fixed(r[k], 3)); });
      cell(tr, r.geomean_speedup ? fixed(r.geomean_speedup, 2) + "×" : "–");
      body.appendChild(tr);
    });
  }

  function renderSteps(problems) {
    var body = document.querySelector("#run-steps tbody");
    body.textContent = "";
    problems.forEach(function (p) {
      if (!p.steps.length) {
        var empty = document.createElement("tr");
        cell(empty, link(p.url, p.slug));
        cell(empty, "not started", "muted").colSpan = 6;
        body.appendChild(empty);
      }
      p.steps.forEach(function (s) {
        var tr = document.createElement("tr");
        cell(tr, link(p.url, p.slug)); cell(tr, s.sample); cell(tr, s.turn);
        var status = cell(tr, s.status);
        status.title = s.error || "";
        status.dataset.status = s.status || "";
        if (s.error) {
          var why = document.createElement("div");
          why.className = "muted step-error";
          why.textContent = s.error.length > 300 ? s.error.slice(0, 299) + "…" : s.error;
          status.appendChild(why);
        }
        var sub = document.createElement("span");
        if (s.submission) {
          sub.appendChild(link(s.submission_url, "#" + s.submission));
          sub.appendChild(document.createTextNode(" " + s.submission_status));
        }
        cell(tr, sub);
        var verdict = document.createElement("span");
        verdict.className = "verdict " + (s.verdict || "");
        verdict.textContent = kbLabel(s.verdict);
        cell(tr, verdict);
        cell(tr, s.speedup ? fixed(s.speedup, 2) + "×" : "");
        body.appendChild(tr);
      });
    });
  }

  function render(state) {
    setText("run-status", state.status);
    setText("run-generated", state.generated);
    setText("run-no-code", state.no_code);
    setText("run-failed", state.failed);
    setText("run-evaluated", state.evaluated);
    setText("run-submissions", state.submissions);
    setText("run-correct", state.correct);
    setText("run-prompt-tokens", state.prompt_tokens);
    setText("run-completion-tokens", state.completion_tokens);
    setText("run-cost", "$" + Number(state.cost_usd).toFixed(4));
    renderFastP(state.fast_p);
    renderFastP(state.fast_p_kernelbench, "run-fast-p-kernelbench");
    renderSteps(state.problem_steps);
  }

  function settled(state) {
    return (state.status === "finished" || state.status === "stopped") &&
      state.evaluated === state.submissions;
  }

  function poll() {
    fetch(url, { headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (state) {
        render(state);
        if (!settled(state)) { setTimeout(poll, 2000); }
      })
      .catch(function () { setTimeout(poll, 5000); });
  }
  poll();
})();
