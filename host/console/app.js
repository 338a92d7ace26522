// The console's entry: the login, the header (host, access, live, logout)
// and the routing between pages by the URL's hash (#/groups,
// #/groups/NAME, #/modules, #/rollouts, #/rollouts/ID, #/cluster). Each
// page renders into <main> and returns the function that stops its reads
// when the page is left.

import { api, session } from "./api.js";
import { el, hideError, setLive, showError } from "./dom.js";
import { renderCluster } from "./cluster.js";
import { renderGroup } from "./group.js";
import { renderGroups } from "./groups.js";
import { renderModules } from "./modules.js";
import { renderRollout, renderRollouts } from "./rollouts.js";

const pages = [
  { page: "groups", pattern: /^#\/groups\/?$/, render: (main) => renderGroups(main) },
  { page: "groups", pattern: /^#\/groups\/(.+)$/, render: (main, [name]) => renderGroup(main, decodeURIComponent(name)) },
  { page: "modules", pattern: /^#\/modules\/?$/, render: (main) => renderModules(main) },
  { page: "rollouts", pattern: /^#\/rollouts\/?$/, render: (main) => renderRollouts(main) },
  { page: "rollouts", pattern: /^#\/rollouts\/(.+)$/, render: (main, [id]) => renderRollout(main, decodeURIComponent(id)) },
  { page: "cluster", pattern: /^#\/cluster\/?$/, render: (main) => renderCluster(main) },
];

let stopPage = null;

function header() {
  document.getElementById("host-url").textContent = location.origin;
  const loggedIn = session.token !== null;
  const mode = document.getElementById("mode");
  mode.hidden = !loggedIn;
  mode.textContent = session.readOnly ? "read-only" : "admin";
  mode.dataset.access = session.access ?? "";
  document.getElementById("logout").hidden = !loggedIn;
  document.getElementById("nav").hidden = !loggedIn;
}

function login(main) {
  const input = el("input", { id: "token", type: "password", autocomplete: "current-password", required: true, spellcheck: "false" });
  const form = el(
    "form",
    { id: "login", class: "login" },
    el("h1", { text: "Log in" }),
    el("p", { text: "The host's admin token, or its read-only token (assignd serve --read-only-token-file)." }),
    el("label", { for: "token", text: "Token" }),
    input,
    el("button", { type: "submit", text: "Log in" }),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    try {
      const answer = await api("/v1/token", { token });
      session.save(token, answer.access);
      hideError();
      if (location.hash === "" || location.hash === "#/login") location.hash = "#/groups";
      else route();
    } catch (e) {
      showError(e.message);
      input.focus();
    }
  });
  main.append(form);
  input.focus();
}

function route() {
  stopPage?.();
  stopPage = null;
  header();
  const main = document.getElementById("main");
  main.replaceChildren();
  hideError();
  if (session.token === null) {
    setLive(null);
    login(main);
    return;
  }
  const hash = location.hash || "#/groups";
  for (const link of document.querySelectorAll("#nav a")) link.removeAttribute("aria-current");
  for (const { page, pattern, render } of pages) {
    const match = pattern.exec(hash);
    if (match) {
      document.querySelector(`#nav a[data-page="${page}"]`)?.setAttribute("aria-current", "page");
      setLive("connecting");
      stopPage = render(main, match.slice(1));
      return;
    }
  }
  main.append(el("h1", { text: "Not found" }), el("p", {}, "No page at ", el("code", { text: hash }), ". ", el("a", { href: "#/groups", text: "Groups" })));
}

document.getElementById("logout").addEventListener("click", () => {
  session.clear();
  location.hash = "";
  route();
});
window.addEventListener("hashchange", route);
route();
