/* Light or dark before first paint (a classic script, so it runs before the page shows).
   Order: ?theme= in the URL (embeds), the reader's saved choice, then the system setting. */
(function () {
  var KEY = "mbi-theme";
  var asked = new URLSearchParams(location.search).get("theme");
  var saved = null;
  try { saved = localStorage.getItem(KEY); } catch (e) { /* storage may be off in iframes */ }
  var theme = asked === "dark" || asked === "light" ? asked : saved;
  if (!theme) theme = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = theme;
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    var label = function () {
      button.setAttribute("aria-pressed", document.documentElement.dataset.theme === "dark");
    };
    label();
    button.addEventListener("click", function () {
      var next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
      document.documentElement.dataset.theme = next;
      try { localStorage.setItem(KEY, next); } catch (e) { /* ignore */ }
      label();
      document.dispatchEvent(new CustomEvent("themechange"));
    });
  });
})();
