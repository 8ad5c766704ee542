// Live leaderboards. Rows arrive rendered by the server's own templates, keyed by data-key;
// only the rows that changed are replaced, the others are only reordered and renumbered.
(function () {
  "use strict";

  function wsUrl(path) {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + window.location.host + path;
  }

  function rowFromHtml(html) {
    var holder = document.createElement("tbody");
    holder.innerHTML = html;
    return holder.firstElementChild;
  }

  function flash(tr) {
    tr.classList.add("changed");
    tr.style.transition = "background-color 2s";
    tr.style.backgroundColor = "#fff3bf";
    setTimeout(function () { tr.style.backgroundColor = ""; }, 2500);
    setTimeout(function () { tr.classList.remove("changed"); }, 5000);
  }

  function rowsByKey(body) {
    var rows = {};
    Array.prototype.forEach.call(body.rows, function (tr) {
      if (tr.dataset.key) { rows[tr.dataset.key] = tr; }
    });
    return rows;
  }

  function showEmpty(body, text, colspan) {
    var tr = body.insertRow();
    tr.className = "empty";
    var td = tr.insertCell();
    td.colSpan = colspan;
    td.textContent = text;
  }

  function replaceAll(table, rows, emptyText) {
    var body = table.tBodies[0];
    var colspan = table.tHead.rows[0].cells.length;
    body.textContent = "";
    rows.forEach(function (r) { body.appendChild(rowFromHtml(r.html)); });
    if (!rows.length) { showEmpty(body, emptyText, colspan); }
  }

  // A rank as [shown rank, tie]: a tie (its time's interval overlaps the one above) is labelled.
  function showRank(cell, rank) {
    cell.textContent = rank[0];
    if (rank[1]) {
      var tie = document.createElement("span");
      tie.className = "tag tie";
      tie.textContent = "tie";
      cell.appendChild(document.createTextNode(" "));
      cell.appendChild(tie);
    }
  }

  // Returns false when the order names a row this page never saw (a missed event).
  function applyOrder(table, keys, ranks, changedRows, changedKeys, emptyText) {
    var body = table.tBodies[0];
    var colspan = table.tHead.rows[0].cells.length;
    var existing = rowsByKey(body);
    changedRows.forEach(function (r) { existing[r.key] = rowFromHtml(r.html); });
    for (var i = 0; i < keys.length; i++) { if (!existing[keys[i]]) { return false; } }
    body.textContent = "";
    keys.forEach(function (key) {
      var tr = existing[key];
      var rankCell = tr.querySelector("td.rank");
      if (rankCell && ranks && ranks[key] !== undefined) { showRank(rankCell, ranks[key]); }
      body.appendChild(tr);
      if (changedKeys.indexOf(key) >= 0) { flash(tr); }
    });
    if (!keys.length) { showEmpty(body, emptyText, colspan); }
    return true;
  }

  function connect(path, onMessage, onGiveUp) {
    var socket;
    try { socket = new WebSocket(wsUrl(path)); } catch (e) { onGiveUp(); return null; }
    var opened = false;
    socket.onopen = function () { opened = true; };
    socket.onmessage = function (event) { onMessage(JSON.parse(event.data), socket); };
    socket.onclose = function () {
      if (opened) { setTimeout(function () { connect(path, onMessage, onGiveUp); }, 2000); }
      else { onGiveUp(); }
    };
    return socket;
  }

  // Without websockets: fetch this page again and take its tables.
  function pollPage(tableIds, every) {
    function poll() {
      fetch(window.location.pathname, { headers: { Accept: "text/html" } })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          tableIds.forEach(function (id) {
            var fresh = doc.getElementById(id), current = document.getElementById(id);
            if (fresh && current) { current.tBodies[0].innerHTML = fresh.tBodies[0].innerHTML; }
          });
        })
        .catch(function () {})
        .then(function () { setTimeout(poll, every); });
    }
    setTimeout(poll, every);
  }

  function startBoard(ranked) {
    var flagged = document.getElementById("board-flagged");
    connect(ranked.dataset.wsPath, function (m, socket) {
      if (m.type === "board") {
        replaceAll(ranked, m.rows, "No correct kernels yet.");
        if (flagged) { replaceAll(flagged, m.flagged, "Nothing flagged."); }
      } else if (m.type === "board_change") {
        var ranks = {};
        // [participant, shown rank] or [participant, shown rank, true] for a tie.
        var keys = m.order.map(function (o) { ranks[o[0]] = [o[1], !!o[2]]; return o[0]; });
        var ok = applyOrder(ranked, keys, ranks, m.rows, m.changed, "No correct kernels yet.");
        if (ok && flagged) {
          ok = applyOrder(flagged, m.flagged_order, null, m.flagged, m.changed, "Nothing flagged.");
        }
        // A row we never saw: reconnect, which sends a fresh snapshot.
        if (!ok) { socket.close(); }
      }
    }, function () { pollPage(["board-ranked", "board-flagged"], 5000); });
  }

  function upsert(table, row, append, limit) {
    if (!table || !row) { return; }
    var body = table.tBodies[0];
    var existing = rowsByKey(body)[row.key];
    var tr = rowFromHtml(row.html);
    if (existing) {
      body.replaceChild(tr, existing);
    } else if (append) {
      Array.prototype.slice.call(body.querySelectorAll("tr.empty")).forEach(function (e) { e.remove(); });
      if (append === "top") { body.insertBefore(tr, body.firstChild); } else { body.appendChild(tr); }
      while (limit && body.rows.length > limit) { body.deleteRow(body.rows.length - 1); }
    } else {
      return;
    }
    flash(tr);
  }

  function startOverview(marker) {
    var participant = marker.dataset.participant || "";
    var hardware = marker.dataset.hardware || "";
    var filtered = marker.dataset.filtered === "1";
    var eager = (marker.dataset.baseline || "eager") === "eager";
    connect(marker.dataset.wsPath, function (m) {
      if (m.type !== "result") { return; }
      var mine = !participant || participant === m.participant_key;
      if (participant && mine) {
        upsert(document.getElementById("entries-table"), m.entry, "bottom");
      }
      if (!participant && m.record && (!hardware || hardware === m.hardware)) {
        upsert(document.getElementById("records-table"), m.record, "top", 20);
      }
      if (mine && eager) {
        // A new row is added only where it belongs: the hardware shown (or every hardware),
        // and no level filter; a row already shown is always replaced.
        var adds = !filtered && (!hardware || hardware === m.hardware);
        (m.model_rows || []).forEach(function (row) {
          upsert(document.getElementById("models-table"), row, adds ? "bottom" : null);
        });
      }
    }, function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    var ranked = document.getElementById("board-ranked");
    if (ranked && ranked.dataset.wsPath) { startBoard(ranked); }
    var marker = document.getElementById("leaderboard-live");
    if (marker && marker.dataset.wsPath) { startOverview(marker); }
  });
})();
