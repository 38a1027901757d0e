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
