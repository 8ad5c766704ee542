// The profile page: a copy button for a new API token, and the address bar back on the profile
// (the token is created by a POST to /accounts/tokens/new/; reloading must not create another,
// and the key is shown this once, so a reload shows the profile without it).
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("new-token");
    if (!box) { return; }
    if (box.dataset.pageUrl && window.history && window.history.replaceState) {
      window.history.replaceState(null, "", box.dataset.pageUrl);
    }
    var button = box.querySelector("button.copy");
    var done = box.querySelector(".copy-done");
    var key = document.getElementById(button ? button.dataset.copy : "");
    if (!button || !key || !navigator.clipboard) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(key.textContent.trim()).then(
        function () { done.textContent = "Copied."; },
        function () { done.textContent = "Copying failed: select the token and copy it."; }
      );
    });
  });
})();
