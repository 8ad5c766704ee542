// A competition's standings, live: told by the server that they changed, the page fetches the
// table again and swaps it in (no reload).
(function () {
  "use strict";
  var box = document.getElementById("standings");
  if (!box || !window.WebSocket) { return; }
  var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  var delay = 1000;

  function refresh() {
    fetch(box.dataset.url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) { if (html !== null) { box.innerHTML = html; } })
      .catch(function () { /* the next event fetches again */ });
  }

  function connect() {
    var socket = new WebSocket(scheme + window.location.host + box.dataset.wsPath);
    socket.onopen = function () { delay = 1000; };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      if (message.type === "standings") { refresh(); }
    };
    socket.onclose = function () {
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
})();
