// What the key may do (`GET /api/me`), so the dashboard offers only what its role can use.
// The API decides anyway: anything else answers 403, shown by api.js with the role named.

import { api } from "./api.js";

const RANK = { read_only: 0, operator: 1, admin: 2 };
// Pages that need more than a read-only key.
const PAGE_ROLES = { live: "operator", review: "operator" };

let me = null; // {workspace_id, workspace_name, role, key_prefix} of the key in use

/** Who the key is; fetched once per log-in. */
export async function load() {
  me = await api("/api/me");
  return me;
}

export function forget() {
  me = null;
}

export function known() {
  return me !== null;
}

export function current() {
  return me;
}

/** May the key do what needs `role`? (unknown: yes, and the API decides) */
export function can(role) {
  return me === null || (RANK[me.role] ?? -1) >= RANK[role];
}

/** The role a page needs (read_only: any key). */
export function pageRole(page) {
  return PAGE_ROLES[page] ?? "read_only";
}

/** The first page a key sees: live calls for an operator, the history otherwise. */
export function homePage() {
  return can("operator") ? "#/live" : "#/calls";
}
