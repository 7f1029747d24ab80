// The single page: log in with an API key, then hash routes to each page.
// Each page's mount(root, params) returns a cleanup that stops its timers and sockets.

import { ApiError, api, auth, checkKey, label } from "./api.js";
import { el, say } from "./dom.js";
import * as clinic from "./clinic.js";
import * as detail from "./detail.js";
import * as guide from "./guide.js";
import * as history from "./history.js";
import * as live from "./live.js";
import * as review from "./review.js";
import * as role from "./role.js";
import * as tasks from "./tasks.js";
import * as recognition from "./recognition.js";

const ROUTES = [
  [/^#\/live$/, "live", (root) => live.mountList(root)],
  [/^#\/live\/([\w-]+)$/, "live", (root, id) => live.mountCall(root, id)],
  [/^#\/calls$/, "calls", (root) => history.mount(root)],
  [/^#\/calls\/([\w-]+)$/, "calls", (root, id) => detail.mount(root, id)],
  [/^#\/guide$/, "guide", (root) => guide.mount(root)],
  [/^#\/review$/, "review", (root) => review.mount(root)],
  [/^#\/tasks$/, "tasks", (root) => tasks.mount(root)],
  [/^#\/tasks\/([\w-]+)$/, "tasks", (root, id) => tasks.mount(root, id)],
  [/^#\/recognition$/, "recognition", (root) => recognition.mount(root)],
  [/^#\/clinic$/, "clinic", (root) => clinic.mount(root)],
  [/^#\/clinic\/([\w-]+)$/, "clinic", (root, id) => clinic.mount(root, id)],
];

/** Where a visit without a page in its address starts: the clinic walkthrough while the
 * workspace has no clinic, else the role's home page (also when the answer is unknown). */
async function homePage() {
  try {
    const clinics = await api("/api/clinics");
    if (Array.isArray(clinics) && clinics.length === 0) return "#/clinic";
  } catch {
    // the role's home page
  }
  return role.homePage();
}

const view = document.getElementById("view");
const nav = document.getElementById("nav");
let cleanup = null;

function unmount() {
  if (cleanup) {
    try {
      cleanup();
    } catch (error) {
      console.error(error);
    }
  }
  cleanup = null;
  view.replaceChildren();
}

function showLogin(message) {
  unmount();
  nav.hidden = true;
  const input = el("input", {
    id: "api-key", type: "password", name: "api-key", autocomplete: "off",
    placeholder: "vk_…", required: true, size: 60,
  });
  const status = el("div", { id: "login-status" });
  const form = el("form", { id: "login", class: "card" },
    el("h1", {}, "Log in"),
    el("label", { for: "api-key" }, "Workspace API key"),
    input,
    el("button", { type: "submit" }, "Log in"),
    status,
    el("p", { id: "key-help", class: "muted" },
      "No key yet? ", el("code", {}, "make run"), " keeps a development key in ",
      el("code", {}, ".data/dev_api_key"),
      " (the DATA_DIR folder; the path is printed when the service starts). Or create one: ",
      el("code", {}, "python main.py api-key create --workspace demo"),
      " (prints the key once)."));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    say(status, "Checking…");
    try {
      if (!(await checkKey(key))) {
        say(status, "invalid API key", "error");
        return;
      }
    } catch (error) {
      say(status, `cannot reach the service: ${error.message}`, "error");
      return;
    }
    auth.set(key);
    if (!location.hash || location.hash === "#/login") location.hash = "#/"; // home page
    else route();
  });
  view.append(form);
  if (message) say(status, message, "error");
  input.focus();
}

/** Learn the key's role once per log-in; show who is logged in and hide what it cannot use. */
async function knowRole() {
  if (role.known()) return;
  try {
    await role.load();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) throw error;
    console.error(error); // unknown role: offer everything, the API still decides
  }
  const me = role.current();
  for (const link of nav.querySelectorAll("a[data-page]")) {
    link.hidden = !role.can(role.pageRole(link.dataset.page));
  }
  let badge = document.getElementById("whoami");
  if (!badge) {
    badge = el("span", { id: "whoami", class: "muted" });
    nav.insertBefore(badge, document.getElementById("logout"));
  }
  badge.textContent = me ? `${me.workspace_name} · ${label(me.role)}` : "";
}

async function route() {
  if (!auth.key) {
    showLogin();
    return;
  }
  try {
    await knowRole();
  } catch {
    return; // the key is invalid: the log-in card is back
  }
  if (!auth.key) return;
  nav.hidden = false;
  if (!location.hash || location.hash === "#/") {
    location.hash = await homePage();
    return;
  }
  const hash = location.hash;
  for (const [pattern, page, mount] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    unmount();
    for (const link of nav.querySelectorAll("a")) {
      link.classList.toggle("active", link.dataset.page === page);
    }
    const needed = role.pageRole(page);
    if (!role.can(needed)) {
      view.append(el("div", { id: "not-allowed", class: "card" },
        el("p", { class: "error" }, `This page needs ${label(needed)} rights; this key is `
          + `${label(role.current().role)}. Ask an admin of the workspace for a key with `
          + "that role.")));
      return;
    }
    cleanup = mount(view, ...match.slice(1)) ?? null;
    return;
  }
  location.hash = role.homePage();
}

window.addEventListener("hashchange", route);
window.addEventListener("dashboard:unauthorized", () => {
  auth.clear();
  role.forget();
  showLogin("invalid API key");
});
window.addEventListener("unhandledrejection", (event) => {
  if (event.reason instanceof ApiError && event.reason.status === 401) event.preventDefault();
});
document.getElementById("logout").addEventListener("click", () => {
  auth.clear();
  role.forget();
  location.hash = "#/login";
  showLogin();
});
route();
