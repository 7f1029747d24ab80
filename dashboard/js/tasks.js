// Outbound tasks: every call the clinic owes someone. Counts on top, filters, the list
// (newest first, a page at a time) with each task's next attempt as the clinic reads the
// time; a task's detail with its attempts linked to their call records and where it came
// from; and, for an operator, claiming a task to make the call yourself instead of the
// dialer, cancelling, retrying, and the new task form. A read-only key sees no actions.

import { ApiError, api } from "./api.js";
import { problemsOf } from "./clinic.js";
import { el, say, shortId, table, toDate } from "./dom.js";
import * as role from "./role.js";

export const STATUSES = ["pending", "in_progress", "claimed", "done", "failed", "cancelled"];
export const KINDS = ["callback", "scheduled", "waitlist_offer", "reminder", "checkin"];
// Reminders come from a clinic's campaign and waitlist offers from a freed slot.
const NEW_KINDS = ["callback", "scheduled", "checkin"];
const OPEN = new Set(["pending", "in_progress"]);
const RETRYABLE = new Set(["failed", "cancelled"]);
const PAGE = 50;
const DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

// --- Pure helpers (exported for the browser tests) ---------------------------------

/** "no_answer" → "no answer"; empty → "—". */
export function words(value) {
  return value ? String(value).replaceAll("_", " ") : "—";
}

/** A moment as read in `zone`: "3 Mar 2031, 10:00 (Europe/London)"; "—" for none. */
export function fmtInZone(value, zone) {
  const date = toDate(value);
  if (!date) return "—";
  const options = { day: "numeric", month: "short", year: "numeric", hour: "2-digit",
    minute: "2-digit", hourCycle: "h23" };
  try {
    const text = new Intl.DateTimeFormat("en-GB", { ...options, timeZone: zone || undefined })
      .format(date);
    return zone ? `${text} (${zone})` : text;
  } catch {
    return new Intl.DateTimeFormat("en-GB", options).format(date); // an unknown zone
  }
}

/** The actions a task's state allows: claim and cancel while open, retry once it ended
 * failed or cancelled (not when the callee asked not to be called). */
export function actionsFor(task) {
  const actions = [];
  if (OPEN.has(task.status)) actions.push("claim", "cancel");
  if (RETRYABLE.has(task.status) && task.outcome !== "opted_out") actions.push("retry");
  return actions;
}

/** The query string of one page of the list. */
export function listQuery(filters, before) {
  const params = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, value] of Object.entries(filters)) if (value) params.set(name, value);
  if (before) params.set("before", before);
  return `/api/tasks?${params}`;
}

/** A datetime-local input's value as ISO (with the browser's offset); "" for none. */
export function isoOrEmpty(localValue) {
  if (!localValue) return "";
  const date = new Date(localValue);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

const ACTION = {
  claim: { path: "claim", label: (task) => (task.kind === "callback" ? "I'll call them myself" : "Claim"),
    done: "Claimed: the dialer will not call; it is yours to make." },
  cancel: { path: "cancel", label: () => "Cancel", done: "Cancelled." },
  retry: { path: "retry", label: () => "Retry", done: "Queued again from now." },
};

const taskLink = (task, text) => el("a", { href: `#/tasks/${encodeURIComponent(task.id)}`,
  class: "task-link" }, text);
const callLink = (id) => (id
  ? el("a", { href: `#/calls/${encodeURIComponent(id)}`, class: "call-link" }, shortId(id))
  : "—");
const nextAttempt = (task) => fmtInZone(task.next_attempt_at, task.clinic_timezone ?? task.timezone);

/** The buttons of the actions `task` allows (none for a key below operator); each calls
 * `run(action, task, button)`. */
function actionButtons(task, run) {
  if (!role.can("operator")) return null;
  const buttons = actionsFor(task).map((action) => {
    const button = el("button", { type: "button", class: `task-action ${action}`
      + (action === "claim" ? "" : " secondary"), dataset: { action, taskId: task.id } },
    ACTION[action].label(task));
    button.addEventListener("click", () => run(action, task, button));
    return button;
  });
  return buttons.length ? el("span", { class: "row-actions" }, buttons) : null;
}

/** Posts `action` on `task`; says what happened (or why not) in `notice`. */
async function act(action, task, button, notice) {
  button.disabled = true;
  try {
    const after = await api(`/api/tasks/${encodeURIComponent(task.id)}/${ACTION[action].path}`,
      { method: "POST" });
    say(notice, ACTION[action].done);
    return after;
  } catch (error) {
    say(notice, error.message, "error");
    button.disabled = false;
    return null;
  }
}

// --- The list ----------------------------------------------------------------------

function summaryView(summary) {
  const line = (title, counts, id) => el("p", { id, class: "summary-line" },
    el("b", {}, `${title}: `),
    Object.entries(counts).map(([name, n], i) => [i ? " · " : "",
      el("span", { class: n ? "count" : "count muted", dataset: { name } }, `${words(name)} ${n}`)]));
  return [
    line(`Tasks (${summary.total})`, summary.by_status, "summary-status"),
    line("How they ended", summary.by_outcome, "summary-outcome"),
    line("Dial attempts", summary.attempts_by_outcome, "summary-attempts"),
  ];
}

export function mount(root, taskId) {
  let alive = true;
  const page = el("div", { id: "tasks-page" });
  root.append(page);
  if (taskId) showTask(page, taskId, () => alive);
  else showList(page, () => alive);
  return () => {
    alive = false;
  };
}

function showList(page, alive) {
  let before = null;
  const summary = el("div", { id: "task-summary", class: "summary-block" });
  const status = el("select", { id: "f-status", name: "status" },
    el("option", { value: "" }, "any"), STATUSES.map((s) => el("option", { value: s }, words(s))));
  const kind = el("select", { id: "f-kind", name: "kind" },
    el("option", { value: "" }, "any"), KINDS.map((k) => el("option", { value: k }, words(k))));
  const filters = el("form", { class: "filters", id: "task-filters" },
    el("label", {}, "Status", status), el("label", {}, "Kind", kind),
    el("button", { type: "submit" }, "Apply"));
  const rows = el("tbody", { id: "task-rows" });
  const notice = el("div", { id: "tasks-status", "aria-live": "polite" });
  const more = el("button", { type: "button", id: "tasks-more", hidden: true }, "Load more");
  const slot = el("div", { class: "slot" });
  const newTask = role.can("operator")
    ? el("button", { type: "button", id: "task-new" }, "New task") : null;
  newTask?.addEventListener("click", () => {
    slot.replaceChildren(newTaskForm(() => slot.replaceChildren()));
    slot.querySelector("input")?.focus();
  });
  page.replaceChildren(el("section", {}, el("h1", {}, "Tasks"),
    el("p", { class: "muted" }, "Calls the clinic owes: callbacks, waitlist offers, reminders, "
      + "check-ins. The dialer makes them in each callee's calling hours; claim one to make it "
      + "yourself."),
    summary, el("div", { class: "actions" }, newTask), slot, filters, notice,
    el("table", { class: "grid", id: "task-list" },
      el("thead", {}, el("tr", {}, ["Kind", "Patient", "Reason", "Priority", "Status",
        "Outcome", "Attempts", "Next attempt (clinic time)", ""].map((h) => el("th", {}, h)))),
      rows),
    more));

  async function loadSummary() {
    try {
      const counts = await api("/api/tasks/summary");
      if (alive()) summary.replaceChildren(...summaryView(counts));
    } catch (error) {
      if (alive()) say(summary, error.message, "error");
    }
  }

  function row(task) {
    const tr = el("tr", { class: "task-row", dataset: { taskId: task.id, status: task.status } },
      el("td", {}, taskLink(task, words(task.kind))),
      el("td", {}, task.patient_name ?? task.phone ?? "—"),
      el("td", { class: "reason" }, task.reason),
      el("td", {}, String(task.priority)),
      el("td", { class: "status" }, el("span", { class: `badge ${task.status}` }, words(task.status))),
      el("td", { class: "outcome" }, words(task.outcome)),
      el("td", {}, `${task.attempts_made}/${task.max_attempts}`),
      el("td", { class: "next" }, nextAttempt(task)),
      el("td", {}, actionButtons(task, async (action, t, button) => {
        const after = await act(action, t, button, notice);
        if (after && alive()) {
          tr.replaceWith(row(after));
          loadSummary();
        }
      })));
    return tr;
  }

  async function load(reset) {
    if (reset) {
      before = null;
      rows.replaceChildren();
    }
    more.disabled = true;
    try {
      const answer = await api(listQuery({ status: status.value, kind: kind.value }, before));
      if (!alive()) return;
      for (const task of answer.tasks) rows.append(row(task));
      before = answer.next_before;
      more.hidden = !before;
      if (!rows.children.length) say(notice, "No tasks match.");
      else if (reset) notice.replaceChildren();
    } catch (error) {
      if (alive()) say(notice, error.message, "error");
    } finally {
      more.disabled = false;
    }
  }

  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  more.addEventListener("click", () => load(false));
  loadSummary();
  load(true);
}

// --- A new task ----------------------------------------------------------------------

function newTaskForm(close) {
  const problems = el("div", { class: "form-problems", "aria-live": "polite" });
  const search = el("input", { id: "task-patient-search", type: "search",
    placeholder: "name or number", minlength: 2 });
  const find = el("button", { type: "button", id: "task-patient-find", class: "secondary" }, "Find");
  const patient = el("select", { id: "task-patient", name: "patient_id", required: true },
    el("option", { value: "" }, "— find the patient first —"));
  const clinic = el("select", { id: "task-clinic", name: "clinic_id" },
    el("option", { value: "" }, "the workspace's clinic"));
  const kind = el("select", { id: "task-kind", name: "kind" },
    NEW_KINDS.map((k) => el("option", { value: k }, words(k))));
  const reason = el("input", { id: "task-reason", name: "reason", required: true, minlength: 3,
    maxlength: 500, placeholder: "asked about their invoice" });
  const goal = el("input", { id: "task-goal", name: "goal", required: true, minlength: 3,
    maxlength: 500, placeholder: "explain the invoice and answer their questions" });
  const priority = el("input", { id: "task-priority", name: "priority", type: "number", min: 1,
    max: 10, step: 1, value: 5 });
  const notBefore = el("input", { id: "task-not-before", name: "not_before", type: "datetime-local" });
  const start = el("input", { id: "task-window-start", type: "time", value: "09:00" });
  const end = el("input", { id: "task-window-end", type: "time", value: "17:00" });
  const days = DAYS.map((name, i) => el("input", { type: "checkbox", name: "days", value: i,
    id: `task-day-${i}`, checked: i < 5 }));
  const save = el("button", { type: "submit", id: "task-create" }, "Create the task");
  const cancel = el("button", { type: "button", class: "secondary" }, "Close");
  cancel.addEventListener("click", close);
  const field = (label, input) => el("div", { class: "field" },
    el("label", { for: input.id }, label), input);

  api("/api/clinics").then((clinics) => {
    if (clinics.length > 1) {
      clinic.replaceChildren(...clinics.map((c) => el("option", { value: c.id }, c.name)));
    }
  }).catch(() => {}); // the workspace's only clinic, and the API says if a choice is needed

  async function findPatients() {
    const q = search.value.trim();
    if (q.length < 2) return;
    try {
      const found = await api(`/api/patients?${new URLSearchParams({ q })}`);
      patient.replaceChildren(...(found.length
        ? found.map((p) => el("option", { value: p.id },
          `${p.name} · born ${p.date_of_birth}${p.phone ? ` · ${p.phone}` : ""}`))
        : [el("option", { value: "" }, "no patient matches")]));
    } catch (error) {
      problems.replaceChildren(el("p", { class: "notice error", role: "alert" }, error.message));
    }
  }
  find.addEventListener("click", findPatients);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      findPatients();
    }
  });

  const form = el("form", { id: "task-form", class: "editor" },
    el("h3", {}, "New task"),
    el("div", { class: "field" }, el("label", { for: "task-patient-search" }, "Patient"),
      el("span", { class: "row-actions" }, search, " ", find), patient),
    field("Clinic calling", clinic), field("Kind", kind), field("Why the clinic calls", reason),
    field("What the call should achieve", goal), field("Priority (1–10)", priority),
    field("Not before (optional; your time)", notBefore),
    el("fieldset", { class: "field" }, el("legend", {}, "Calling window (the patient's time)"),
      el("span", { class: "hours-row" }, start, "–", end),
      el("span", { class: "checks" }, days.map((box, i) =>
        el("label", { class: "check", for: box.id }, box, ` ${DAYS[i]}`)))),
    el("div", { class: "actions" }, save, cancel), problems);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      patient_id: patient.value, kind: kind.value, reason: reason.value.trim(),
      goal: goal.value.trim(), priority: Number(priority.value),
      window: { start: start.value, end: end.value,
        days: days.filter((d) => d.checked).map((d) => Number(d.value)) },
    };
    if (clinic.value) body.clinic_id = clinic.value;
    const when = isoOrEmpty(notBefore.value);
    if (when) body.not_before = when;
    if (!body.patient_id) {
      problems.replaceChildren(el("p", { class: "notice error", role: "alert" },
        "Find and choose the patient to call."));
      return;
    }
    save.disabled = true;
    try {
      const task = await api("/api/tasks", { method: "POST", body });
      location.hash = `#/tasks/${encodeURIComponent(task.id)}`;
    } catch (error) {
      save.disabled = false;
      problems.replaceChildren(el("ul", { class: "problems", role: "alert" },
        problemsOf(error).map((p) => el("li", {}, p.path ? [el("code", {}, p.path), " "] : null,
          p.message))));
    }
  });
  return form;
}

// --- One task ------------------------------------------------------------------------

async function showTask(page, taskId, alive) {
  const notice = el("div", { id: "task-status", "aria-live": "polite" });

  function origin(task) {
    const parts = [];
    if (task.source_call) {
      parts.push(el("dt", {}, "Promised on the call"), el("dd", {}, callLink(task.source_call)));
    }
    const request = task.callback_request;
    if (request) {
      parts.push(el("dt", {}, "Callback request"), el("dd", { id: "task-request" },
        request.urgent ? el("span", { class: "badge warn" }, "urgent") : null, " ",
        request.reason, request.message ? el("span", { class: "muted" }, ` — “${request.message}”`) : null));
    }
    const slot = task.offer;
    if (slot) {
      parts.push(el("dt", {}, "Slot offered"), el("dd", { id: "task-offer" },
        `${fmtInZone(slot.starts_at, slot.timezone)} · ${slot.appointment_type ?? "?"} with `
        + `${slot.practitioner ?? "?"} at ${slot.location ?? "?"}`));
    }
    const visit = task.appointment;
    if (visit) {
      parts.push(el("dt", {}, "Appointment"), el("dd", { id: "task-appointment" },
        `${fmtInZone(visit.starts_at, visit.timezone)} · ${visit.appointment_type} with `
        + `${visit.practitioner} at ${visit.location} (${words(visit.status)})`));
    }
    return parts;
  }

  function render(task) {
    const hours = task.window ?? {};
    const attempts = task.attempts ?? [];
    page.replaceChildren(
      el("p", {}, el("a", { href: "#/tasks" }, "← All tasks")),
      el("h1", {}, `${words(task.kind)} · ${task.patient_name ?? task.phone ?? "unknown callee"}`),
      el("div", { class: "actions", id: "task-actions" }, actionButtons(task, async (action, t, button) => {
        const after = await act(action, t, button, notice);
        if (after && alive()) render(after); // the notice keeps what happened
      })),
      notice,
      el("dl", { class: "kv", id: "task-fields" },
        el("dt", {}, "Status"), el("dd", { id: "task-state" },
          el("span", { class: `badge ${task.status}` }, words(task.status)),
          task.outcome ? ` · ${words(task.outcome)}` : ""),
        task.claimed_by ? [el("dt", {}, "Claimed by"),
          el("dd", {}, `${task.claimed_by}, ${fmtInZone(task.claimed_at, task.clinic_timezone)}`)] : null,
        el("dt", {}, "Why"), el("dd", {}, task.reason),
        el("dt", {}, "Goal"), el("dd", {}, task.goal),
        el("dt", {}, "Priority"), el("dd", {}, String(task.priority)),
        el("dt", {}, "Number"), el("dd", {}, task.phone ?? "—"),
        el("dt", {}, "Calling window"), el("dd", {},
          `${String(hours.start ?? "").slice(0, 5)}–${String(hours.end ?? "").slice(0, 5)} `
          + `${(hours.days ?? []).map((d) => DAYS[d]).join(", ")} (${task.timezone})`),
        el("dt", {}, "Next attempt"), el("dd", { id: "task-next" }, nextAttempt(task)),
        el("dt", {}, "Attempts"), el("dd", {}, `${task.attempts_made} of ${task.max_attempts}`),
        task.last_error ? [el("dt", {}, "Last error"), el("dd", { class: "error" }, task.last_error)] : null,
        el("dt", {}, "Made by"), el("dd", {}, `${task.written_by}, ${fmtInZone(task.created_at, task.clinic_timezone)}`),
        origin(task)),
      el("h2", {}, `Attempts · ${attempts.length}`),
      attempts.length
        ? table(["#", "Started", "Ended", "Status", "Outcome", "Detail", "Call record"],
          attempts.map((a) => [String(a.number), fmtInZone(a.started_at, task.clinic_timezone),
            fmtInZone(a.ended_at, task.clinic_timezone), words(a.status), words(a.outcome),
            a.detail || "—", callLink(a.call_id)]), { class: "grid", id: "task-attempts" })
        : el("p", { class: "empty", id: "task-attempts" }, "Not dialled yet."));
  }

  say(page, "Loading…");
  try {
    const task = await api(`/api/tasks/${encodeURIComponent(taskId)}`);
    if (alive()) render(task);
  } catch (error) {
    if (!alive()) return;
    say(page, error instanceof ApiError && error.status === 404
      ? "No such task in this workspace." : error.message, "error");
  }
}
