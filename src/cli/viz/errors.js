// errors.js — runs first: keeps every script error and console.error of the page, so the
// self-test (selftest.js) can report them, and so a failure is shown on the page, not only in
// a console nobody opens.
'use strict';
window.VZ_ERRORS = [];
window.addEventListener('error', (e) => {
  window.VZ_ERRORS.push(String(e.message || e.error || e) + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
});
(function () {
  const orig = console.error.bind(console);
  console.error = function (...args) {
    window.VZ_ERRORS.push(args.map(String).join(' '));
    orig(...args);
  };
})();
