// webhookd admin pages. Served as a file, not inline, so that the pages'
// Content-Security-Policy admits no inline script.
"use strict";

// A form with data-confirm asks before it submits (the force replay).
document.querySelectorAll("form[data-confirm]").forEach(function (form) {
  form.addEventListener("submit", function (event) {
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
});

// Relative times (<time class="rel" datetime=…>) stay current: "in 12 s",
// "3 min ago", as the server words them.
function durationWords(ms) {
  var s = Math.round(ms / 1000);
  if (s < 60) { return s + " s"; }
  if (s < 3600) { return Math.round(s / 60) + " min"; }
  if (s < 48 * 3600) { return Math.round(s / 3600) + " h"; }
  return Math.floor(s / 86400) + " d";
}
function updateTimes() {
  var now = Date.now();
  document.querySelectorAll("time.rel").forEach(function (el) {
    var d = Date.parse(el.getAttribute("datetime")) - now;
    el.textContent = d >= 0 ? "in " + durationWords(d) : durationWords(-d) + " ago";
  });
}
updateTimes();
window.setInterval(updateTimes, 1000);

// A page showing something in flight (an element with data-live) follows
// it: it reads itself again every 2 s and swaps in the parts marked
// data-live-part (never the forms), until nothing shown is in flight.
var livePoll = 2000;
function follow() {
  window.fetch(window.location.href, { headers: { Accept: "text/html" }, credentials: "same-origin", cache: "no-store" })
    .then(function (resp) {
      if (!resp.ok) { throw new Error("HTTP " + resp.status); }
      return resp.text();
    })
    .then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html");
      document.querySelectorAll("[data-live-part]").forEach(function (el) {
        var part = el.id && fresh.getElementById(el.id);
        if (part) { el.replaceWith(document.importNode(part, true)); }
      });
      updateTimes();
      if (fresh.querySelector("[data-live]")) { window.setTimeout(follow, livePoll); }
    })
    .catch(function () { window.setTimeout(follow, livePoll * 5); });
}
if (document.querySelector("[data-live]")) { window.setTimeout(follow, livePoll); }
