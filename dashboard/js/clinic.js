// Clinic set-up: the workspace's clinics and, per clinic, its file section by section
// (the header, locations, practitioners, appointment types, weekly schedules, closures)
// with forms to add, edit and delete; the import box (check, then import) and the export;
// and the walkthrough an empty workspace opens on. Every save goes through
// /api/clinics/{id}/{section}, which validates the whole file as an import does and
// changes nothing when there is a problem: the problems are shown by the form, with
// their path in the file.

import { ApiError, api, apiText } from "./api.js";
import { append, el, say, table } from "./dom.js";
import { remindersSection } from "./reminders.js";
import * as role from "./role.js";

export const DAYS = [["mon", "Monday"], ["tue", "Tuesday"], ["wed", "Wednesday"],
  ["thu", "Thursday"], ["fri", "Friday"], ["sat", "Saturday"], ["sun", "Sunday"]];
const CLI_IMPORT = "python main.py clinic import FILE --workspace";
const YAML_TYPE = "application/x-yaml";

// --- Pure helpers (exported for the browser tests) ---------------------------------

/** A price kept in cents, shown as money: "150.00", or "$150.00" with a currency. */
export function fmtMoney(cents, currency) {
  if (cents === null || cents === undefined || Number.isNaN(Number(cents))) return "—";
  const amount = Number(cents) / 100;
  if (currency) {
    try {
      return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(amount);
    } catch {
      // an unknown currency code: the plain amount below
    }
  }
  return amount.toFixed(2);
}

/** "150", "150.5", "$1,200.00" → cents; null when it is not an amount. */
export function parseMoney(text) {
  const cleaned = String(text ?? "").replace(/[\s,$€£]/g, "");
  if (!/^\d+(\.\d{1,2})?$/.test(cleaned)) return null;
  const [whole, fraction = ""] = cleaned.split(".");
  return Number(whole) * 100 + Number(fraction.padEnd(2, "0"));
}

/** [["09:00", "12:00"], ...] → "09:00-12:00, 13:00-17:00" */
export function fmtBlocks(blocks) {
  if (!Array.isArray(blocks)) return "";
  return blocks.map((b) => (Array.isArray(b) ? b.join("-") : String(b))).join(", ");
}

/** "09:00-12:00, 13:00-17:00" → [["09:00", "12:00"], ...]; null when a block is not
 * written as two times. Whether the times make sense is the service's to say. */
export function parseBlocks(text) {
  const parts = String(text ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  const blocks = [];
  for (const part of parts) {
    const match = part.match(/^(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})$/);
    if (!match) return null;
    blocks.push([match[1].padStart(5, "0"), match[2].padStart(5, "0")]);
  }
  return blocks;
}

/** "a, b , ,c" → ["a", "b", "c"] */
export function parseList(text) {
  return String(text ?? "").split(",").map((p) => p.trim()).filter(Boolean);
}

/** Opening hours {mon: ["08:00", "17:00"], ...} → "Mon 08:00-17:00 · Tue …" */
export function fmtHours(hours) {
  if (!hours || typeof hours !== "object") return "—";
  const days = DAYS.filter(([day]) => hours[day]).map(([day, name]) => {
    const value = hours[day];
    const span = Array.isArray(value) && Array.isArray(value[0]) ? fmtBlocks(value)
      : Array.isArray(value) ? value.join("-") : String(value);
    return `${name.slice(0, 3)} ${span}`;
  });
  return days.length ? days.join(" · ") : "closed every day";
}

/** The problems a refused request carries, as [{path, line, message}]: the clinic
 * routes' {problems}, FastAPI's field errors, or the message alone. */
export function problemsOf(error) {
  const detail = error instanceof ApiError ? error.detail : null;
  if (detail && Array.isArray(detail.problems)) {
    const shown = detail.problems.map((p) => ({
      path: p.path ?? "", line: p.line ?? null, message: p.message ?? "" }));
    if (detail.more) shown.push({ path: "", line: null, message: `${detail.more} more problems` });
    return shown;
  }
  if (Array.isArray(detail)) {
    return detail.map((d) => ({
      path: (d.loc ?? []).filter((part) => part !== "body").join("."),
      line: null, message: d.msg ?? String(d) }));
  }
  return [{ path: "", line: null, message: error?.message ?? String(error) }];
}

/** A file name for a clinic's export: "demo-family-clinic.yaml". */
export function exportName(name) {
  const slug = String(name ?? "clinic").toLowerCase().replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return `${slug || "clinic"}.yaml`;
}

// --- Sections of the clinic file ---------------------------------------------------

const names = (items) => (items ?? []).map((item) => item.name).filter(Boolean);

/** How each part of the file is shown and edited. `key`: how one item is addressed in
 * /api/clinics/{id}/{path}/{key} (named parts by name; schedules and closures by their
 * position in the section). Fields not listed are kept as they are on an edit. */
export const SECTIONS = [
  {
    name: "locations", path: "locations", title: "Locations", noun: "location",
    key: (item) => item.name, label: (item) => item.name, kept: true,
    columns: ["Name", "Timezone", "Address", "Phone", "Opening hours"],
    cells: (l) => [el("b", {}, l.name), l.timezone ?? "—", l.address ?? "—",
      l.phone_number ?? "—", fmtHours(l.opening_hours)],
    fields: [
      { name: "name", label: "Name", kind: "text", required: true },
      { name: "timezone", label: "Timezone", kind: "text", required: true,
        placeholder: "America/Chicago" },
      { name: "address", label: "Address", kind: "text", empty: "" },
      { name: "phone_number", label: "Phone", kind: "text", placeholder: "+15550100110" },
      { name: "opening_hours", label: "Opening hours", kind: "hours" },
    ],
  },
  {
    name: "practitioners", path: "practitioners", title: "Practitioners", noun: "practitioner",
    key: (item) => item.name, label: (item) => item.name, kept: true,
    columns: ["Name", "Title", "Years of experience"],
    cells: (p) => [el("b", {}, p.name), p.title ?? "—", p.years_experience ?? "—"],
    fields: [
      { name: "name", label: "Name", kind: "text", required: true },
      { name: "title", label: "Title", kind: "text", placeholder: "Family physician",
        empty: "" },
      { name: "years_experience", label: "Years of experience", kind: "number", min: 0 },
    ],
  },
  {
    name: "appointment_types", path: "appointment-types", title: "Appointment types",
    noun: "appointment type", key: (item) => item.name, label: (item) => item.name, kept: true,
    columns: ["Name", "Duration", "Price", "Keywords", "Description"],
    cells: (t) => [el("b", {}, t.name),
      t.duration_min === undefined ? "—" : `${t.duration_min} min`,
      fmtMoney(t.price_cents, t.currency), (t.keywords ?? []).join(", ") || "—",
      el("span", { class: "muted" }, t.description ?? "")],
    fields: [
      { name: "name", label: "Name", kind: "text", required: true },
      { name: "duration_min", label: "Duration (minutes)", kind: "number", min: 1,
        required: true },
      { name: "price_cents", label: "Price", kind: "money", placeholder: "85.00",
        required: true },
      { name: "keywords", label: "Keywords (comma-separated)", kind: "list" },
      { name: "description", label: "Description", kind: "textarea", empty: "" },
    ],
  },
  {
    name: "schedules", path: "schedules", title: "Weekly schedules", noun: "schedule",
    key: (_item, index) => String(index),
    label: (s) => `the schedule of ${s.practitioner ?? "?"} at ${s.location ?? "?"}`,
    columns: ["Practitioner", "Location", "Days", "Hours", "Offers"],
    cells: (s) => [el("b", {}, s.practitioner ?? "—"), s.location ?? "—",
      (s.days ?? []).join(", "), fmtBlocks(s.blocks), (s.offers ?? []).join(", ")],
    fields: [
      { name: "practitioner", label: "Practitioner", kind: "select", required: true,
        options: (file) => names(file.practitioners) },
      { name: "location", label: "Location", kind: "select", required: true,
        options: (file) => names(file.locations) },
      { name: "days", label: "Days", kind: "days" },
      { name: "blocks", label: "Hours (e.g. 09:00-12:00, 13:00-17:00)", kind: "blocks" },
      { name: "offers", label: "Offers", kind: "checks",
        options: (file) => names(file.appointment_types) },
    ],
  },
  {
    name: "closures", path: "closures", title: "Closures", noun: "closure",
    key: (_item, index) => String(index),
    label: (c) => `the closure from ${c.from ?? "?"}`,
    columns: ["From", "To", "Reason", "Location"],
    cells: (c) => [el("b", {}, c.from ?? "—"), c.to ?? c.from ?? "—", c.reason ?? "—",
      c.location ?? "every location"],
    fields: [
      { name: "from", label: "From", kind: "date", required: true },
      { name: "to", label: "To (inclusive)", kind: "date" },
      { name: "reason", label: "Reason (callers hear it)", kind: "text", required: true,
        placeholder: "a public holiday" },
      { name: "location", label: "Location", kind: "select", blank: "Every location",
        options: (file) => names(file.locations) },
    ],
  },
];

const HEADER = {
  name: "clinic", path: "clinic", title: "Clinic", noun: "clinic",
  fields: [
    { name: "name", label: "Name", kind: "text", required: true },
    { name: "phone_numbers", label: "Phone numbers (comma-separated)", kind: "list" },
    { name: "greeting", label: "Greeting", kind: "textarea" },
  ],
};

class LocalProblem extends Error {
  constructor(path, message) {
    super(message);
    this.path = path;
  }
}

/** One field's control for `value`: {node, read()}; read() gives the value to store
 * (undefined: leave the field out; `field.empty` is what an empty text is stored as) or
 * throws LocalProblem. */
function control(field, value, file, idBase) {
  const id = `${idBase}-${field.name}`;
  const labelled = (input) => el("div", { class: "field" },
    el("label", { for: id }, field.label), input);
  const missing = () => new LocalProblem(field.name, `${field.label} is required`);
  const textOf = (input) => input.value.trim();
  switch (field.kind) {
    case "text":
    case "date": {
      const input = el("input", { id, name: field.name, type: field.kind,
        value: value ?? "", placeholder: field.placeholder, required: field.required });
      return { node: labelled(input), read: () => {
        const text = textOf(input);
        if (!text && field.required) throw missing();
        return text || field.empty;
      } };
    }
    case "textarea": {
      const input = el("textarea", { id, name: field.name, rows: 2 }, value ?? "");
      return { node: labelled(input), read: () => textOf(input) || field.empty };
    }
    case "number": {
      const input = el("input", { id, name: field.name, type: "number", min: field.min,
        step: 1, value: value ?? "", required: field.required });
      return { node: labelled(input), read: () => {
        const text = textOf(input);
        if (!text) {
          if (field.required) throw missing();
          return undefined;
        }
        const number = Number(text);
        if (!Number.isInteger(number)) throw new LocalProblem(field.name, `${field.label}: a whole number`);
        return number;
      } };
    }
    case "money": {
      const input = el("input", { id, name: field.name, type: "text", inputmode: "decimal",
        placeholder: field.placeholder,
        value: value === undefined || value === null ? "" : fmtMoney(value) });
      return { node: labelled(input), read: () => {
        const text = textOf(input);
        if (!text) {
          if (field.required) throw missing();
          return undefined;
        }
        const cents = parseMoney(text);
        if (cents === null) throw new LocalProblem(field.name, `${field.label}: an amount such as 85.00`);
        return cents;
      } };
    }
    case "list": {
      const input = el("input", { id, name: field.name, type: "text",
        value: (value ?? []).join(", ") });
      return { node: labelled(input), read: () => parseList(input.value) };
    }
    case "blocks": {
      const input = el("input", { id, name: field.name, type: "text", value: fmtBlocks(value),
        placeholder: "09:00-12:00, 13:00-17:00" });
      return { node: labelled(input), read: () => {
        const blocks = parseBlocks(input.value);
        if (blocks === null) {
          throw new LocalProblem(field.name, "write hours as 09:00-12:00, separated by commas");
        }
        return blocks;
      } };
    }
    case "select": {
      const choices = field.options(file);
      if (value && !choices.includes(value)) choices.push(value);
      const select = el("select", { id, name: field.name, required: field.required },
        field.blank !== undefined || !value ? el("option", { value: "" }, field.blank ?? "—") : null,
        choices.map((choice) => el("option", { value: choice, selected: choice === value }, choice)));
      return { node: labelled(select), read: () => {
        if (!select.value && field.required) throw missing();
        return select.value || undefined;
      } };
    }
    case "days":
    case "checks": {
      const choices = field.kind === "days" ? DAYS
        : field.options(file).map((choice) => [choice, choice]);
      const chosen = new Set(value ?? []);
      for (const item of chosen) {
        if (!choices.some(([choice]) => choice === item)) choices.push([item, item]);
      }
      const boxes = choices.map(([choice, label], i) => {
        const box = el("input", { type: "checkbox", id: `${id}-${i}`, name: field.name,
          value: choice, checked: chosen.has(choice) });
        return { choice, node: el("label", { class: "check", for: `${id}-${i}` }, box, ` ${label}`), box };
      });
      const node = el("fieldset", { id, class: "field checks" }, el("legend", {}, field.label),
        boxes.map((b) => b.node));
      return { node, read: () => boxes.filter((b) => b.box.checked).map((b) => b.choice) };
    }
    case "hours": {
      const rows = DAYS.map(([day, label]) => {
        const span = Array.isArray(value?.[day]) ? value[day] : [];
        const open = el("input", { type: "checkbox", id: `${id}-${day}`, checked: span.length > 0 });
        const from = el("input", { type: "time", id: `${id}-${day}-from`, value: span[0] ?? "" });
        const to = el("input", { type: "time", id: `${id}-${day}-to`, value: span[1] ?? "" });
        const node = el("div", { class: "hours-row" },
          el("label", { for: `${id}-${day}` }, open, ` ${label}`),
          el("label", { for: `${id}-${day}-from`, class: "sr-only" }, `${label} opens at`), from,
          el("span", { "aria-hidden": "true" }, "–"),
          el("label", { for: `${id}-${day}-to`, class: "sr-only" }, `${label} closes at`), to);
        return { day, label, open, from, to, node };
      });
      const node = el("fieldset", { id, class: "field hours" }, el("legend", {}, field.label),
        rows.map((r) => r.node));
      return { node, read: () => {
        const hours = {};
        for (const r of rows) {
          if (!r.open.checked) continue;
          if (!r.from.value || !r.to.value) {
            throw new LocalProblem(`${field.name}.${r.day}`, `${r.label}: give the opening and closing times`);
          }
          hours[r.day] = [r.from.value.slice(0, 5), r.to.value.slice(0, 5)];
        }
        return hours;
      } };
    }
    default:
      throw new Error(`unknown field kind ${field.kind}`);
  }
}

/** A problems list (role=alert), each with its path in the file and its line. */
function problemList(problems) {
  return el("ul", { class: "problems", role: "alert" }, problems.map((p) => el("li", {},
    p.path ? [el("code", {}, p.path), " "] : null, p.message,
    p.line ? el("span", { class: "muted" }, ` (line ${p.line})`) : null)));
}

function changesList(result, dryRun) {
  const changes = result.changes ?? [];
  const warnings = result.warnings ?? [];
  const head = dryRun
    ? (changes.length ? "No problems. Importing would:" : "No problems, and nothing would change.")
    : (changes.length ? "Saved:" : "Saved; nothing changed.");
  return el("div", { class: "notice info", role: "status" }, el("p", {}, head),
    changes.length ? el("ul", { class: "changes" }, changes.map((c) => el("li", {}, c))) : null,
    warnings.length ? el("ul", { class: "warnings" }, warnings.map((w) => el("li", {}, `Warning: ${w}`))) : null);
}

const FORBIDDEN = "This key may view the clinic but not change it: an admin key is needed.";

/** May the key in use change the clinic? (its role unknown: yes, and a 403 says no) */
const mayChange = () => role.can("admin");

/** The import box: paste or choose a file, Check (dry run) and Import. */
function importBox({ canWrite, onImported }) {
  const text = el("textarea", { id: "import-text", name: "clinic-file", rows: 12,
    spellcheck: "false", placeholder: "clinic:\n  name: …" });
  const file = el("input", { id: "import-file", type: "file",
    accept: ".yaml,.yml,.json,application/json,application/x-yaml,text/yaml" });
  const check = el("button", { type: "button", id: "import-check", disabled: !canWrite }, "Check");
  const apply = el("button", { type: "submit", id: "import-apply", disabled: !canWrite }, "Import");
  const out = el("div", { id: "import-result", "aria-live": "polite" });
  file.addEventListener("change", async () => {
    const chosen = file.files?.[0];
    if (!chosen) return;
    text.value = await chosen.text();
    out.replaceChildren();
  });
  async function send(dryRun) {
    if (!text.value.trim()) {
      out.replaceChildren(problemList([{ path: "", message: "paste a clinic file or choose one first" }]));
      return;
    }
    out.replaceChildren(el("p", { class: "muted" }, dryRun ? "Checking…" : "Importing…"));
    check.disabled = apply.disabled = true;
    try {
      const result = await api(`/api/clinics${dryRun ? "?dry_run=true" : ""}`, {
        method: "POST", text: text.value, contentType: YAML_TYPE });
      out.replaceChildren(changesList(result, dryRun));
      if (!dryRun) onImported(result);
    } catch (error) {
      out.replaceChildren(error instanceof ApiError && error.status === 403
        ? el("p", { class: "notice error", role: "alert" }, error.message)
        : problemList(problemsOf(error)));
    } finally {
      check.disabled = apply.disabled = !canWrite;
    }
  }
  check.addEventListener("click", () => send(true));
  const form = el("form", { id: "import", class: "import" },
    el("label", { for: "import-text" }, "Clinic file (YAML or JSON): paste it here"),
    text,
    el("label", { for: "import-file" }, "…or choose a file ", file),
    el("div", { class: "actions" }, check, apply),
    canWrite ? null : el("p", { class: "muted", id: "import-note" }, FORBIDDEN),
    out);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(false);
  });
  return form;
}

/** A word for a shell command line: as it is when plain, else single-quoted. */
export function shellWord(text) {
  const word = String(text);
  return /^[\w.@%+=:,/-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

function walkthrough(box) {
  const workspace = shellWord(role.current()?.workspace_name ?? "W");
  return el("section", { id: "clinic-walkthrough", class: "card wide" },
    el("h1", {}, "Set up your clinic"),
    el("p", { class: "lead" }, "This workspace has no clinic yet. Calls are answered for a "
      + "clinic: its name and numbers, where it is and when it is open, who works there, "
      + "and what callers can book."),
    el("h2", {}, "1. Write a clinic file"),
    el("p", {}, "A clinic file is one YAML (or JSON) file with these sections: ",
      el("code", {}, "clinic"), " (name, phone numbers, greeting), ",
      el("code", {}, "locations"), " (timezone, address, phone, opening hours), ",
      el("code", {}, "practitioners"), ", ", el("code", {}, "appointment_types"),
      " (duration, price, keywords), ", el("code", {}, "schedules"),
      " (who works where, on which days and hours, offering what) and ",
      el("code", {}, "closures"), " (holidays and other closed days, with the reason callers hear)."),
    el("p", {}, "The README's section ", el("b", {}, "“Your clinic”"),
      " describes every field and has a complete example to start from (also in ",
      el("code", {}, "docs/examples/clinic.yaml"), " in the repository)."),
    el("h2", {}, "2. Check it, then import it"),
    el("p", {}, "“Check” lists what the import would do, or every problem with its line, "
      + "and changes nothing. “Import” applies the file in one step."),
    box,
    el("h2", {}, "Or from the command line"),
    el("pre", {}, el("code", { id: "clinic-cli" }, `${CLI_IMPORT} ${workspace}`)));
}

// --- The views ---------------------------------------------------------------------

export function mount(root, clinicId) {
  let alive = true;
  const page = el("div", { id: "clinic-page" });
  root.append(page);
  if (clinicId) showClinic(page, clinicId, () => alive);
  else showList(page, () => alive);
  return () => {
    alive = false;
  };
}

async function showList(page, alive) {
  say(page, "Loading…");
  let clinics;
  try {
    clinics = await api("/api/clinics");
  } catch (error) {
    if (alive()) say(page, error.message, "error");
    return;
  }
  if (!alive()) return;
  const canWrite = mayChange();
  const box = importBox({ canWrite, onImported: (result) => {
    if (result.clinic_id) location.hash = `#/clinic/${result.clinic_id}`;
  } });
  if (!clinics.length) {
    page.replaceChildren(walkthrough(box));
    return;
  }
  page.replaceChildren(el("section", { id: "clinics" },
    el("h1", {}, "Clinics"),
    table(["Clinic", "Numbers", "Locations", "Practitioners", "Appointment types", "Upcoming closures"],
      clinics.map((c) => [
        el("a", { href: `#/clinic/${encodeURIComponent(c.id)}`, class: "clinic-link" }, c.name),
        (c.phone_numbers ?? []).join(", ") || "—", String(c.locations ?? 0),
        String(c.practitioners ?? 0), String(c.appointment_types ?? 0),
        String(c.closures_upcoming ?? 0)]),
      { class: "grid", id: "clinic-list" }),
    el("h2", {}, "Import a clinic file"),
    el("p", { class: "muted" }, "A file names its clinic: importing it updates that clinic, "
      + "or adds it when the workspace has none of that name."),
    box));
}

async function showClinic(page, clinicId, alive) {
  const base = `/api/clinics/${encodeURIComponent(clinicId)}`;
  let canWrite = mayChange();
  let file;

  async function load() {
    file = await api(base);
  }

  function render(status = null) {
    const note = canWrite ? null
      : el("p", { class: "notice info", id: "clinic-readonly" }, FORBIDDEN);
    const exportLink = el("a", { href: `${base}?format=yaml`, id: "clinic-export",
      download: exportName(file.clinic?.name) }, "Export (YAML)");
    exportLink.addEventListener("click", (event) => {
      event.preventDefault();
      exportFile(exportLink);
    });
    page.replaceChildren();
    append(page, [
      el("p", {}, el("a", { href: "#/clinic" }, "← All clinics")),
      el("h1", {}, file.clinic?.name ?? "Clinic"),
      el("div", { class: "actions" }, exportLink),
      note, status,
      headerSection(),
      remindersSection(clinicId, names(file.appointment_types), canWrite),
      SECTIONS.map(listSection)]);
  }

  async function exportFile(link) {
    try {
      const text = await apiText(`${base}?format=yaml`);
      const url = URL.createObjectURL(new Blob([text], { type: YAML_TYPE }));
      const download = el("a", { href: url, download: link.getAttribute("download") });
      download.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (error) {
      say(page.querySelector("#clinic-status") ?? page, error.message, "error");
    }
  }

  /** Sends one change; on success reloads and re-renders with what changed, on a
   * refusal shows the problems in `problems` and leaves the form as it is. */
  async function save(request, problems, buttons) {
    for (const button of buttons) button.disabled = true;
    try {
      const result = await api(request.path, { method: request.method, body: request.body });
      await load();
      if (alive()) render(el("div", { id: "clinic-status" }, changesList(result, false)));
    } catch (error) {
      if (!alive()) return;
      if (error instanceof ApiError && error.status === 403) {
        canWrite = false;
        problems.replaceChildren(el("p", { class: "notice error", role: "alert" }, error.message));
      } else {
        problems.replaceChildren(problemList(problemsOf(error)));
      }
      for (const button of buttons) button.disabled = false;
    }
  }

  /** A form for `spec`'s fields over `item`; `submit(item)` is given the edited item. */
  function editor(spec, item, title, submit, onCancel) {
    const controls = spec.fields.map((field) => ({ field,
      ...control(field, item[field.name], file, `${spec.name}-edit`) }));
    const problems = el("div", { class: "form-problems", "aria-live": "polite" });
    const saveButton = el("button", { type: "submit", disabled: !canWrite }, "Save");
    const cancel = el("button", { type: "button", class: "secondary" }, "Cancel");
    const form = el("form", { id: `form-${spec.path}`, class: "editor" },
      el("h3", {}, title), controls.map((c) => c.node),
      el("div", { class: "actions" }, saveButton, cancel), problems);
    cancel.addEventListener("click", onCancel);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const edited = structuredClone(item);
      const local = [];
      for (const c of controls) {
        try {
          const value = c.read();
          if (value === undefined) delete edited[c.field.name];
          else edited[c.field.name] = value;
        } catch (error) {
          if (!(error instanceof LocalProblem)) throw error;
          local.push({ path: error.path, message: error.message });
        }
      }
      if (local.length) {
        problems.replaceChildren(problemList(local));
        return;
      }
      save(submit(edited), problems, [saveButton, cancel]);
    });
    return form;
  }

  function headerSection() {
    const header = file.clinic ?? {};
    const slot = el("div", { class: "slot" });
    const edit = el("button", { type: "button", class: "edit", disabled: !canWrite },
      "Edit the clinic's name, numbers and greeting");
    edit.addEventListener("click", () => {
      slot.replaceChildren(editor(HEADER, header, "The clinic",
        (edited) => ({ method: "PUT", path: `${base}/clinic`, body: edited }),
        () => slot.replaceChildren()));
      slot.querySelector("input, select, textarea")?.focus();
    });
    return el("section", { id: "clinic-header", "aria-labelledby": "clinic-header-title" },
      el("h2", { id: "clinic-header-title" }, "Clinic"),
      el("dl", { class: "kv" },
        el("dt", {}, "Name"), el("dd", {}, header.name ?? "—"),
        el("dt", {}, "Phone numbers"), el("dd", {}, (header.phone_numbers ?? []).join(", ") || "—"),
        el("dt", {}, "Greeting"), el("dd", {}, header.greeting ?? "—")),
      el("div", { class: "actions" }, edit), slot);
  }

  function listSection(spec) {
    const items = file[spec.name] ?? [];
    const slot = el("div", { class: "slot" });
    const open = (form) => {
      slot.replaceChildren(form);
      form.querySelector("input, select, textarea")?.focus();
    };
    const close = () => slot.replaceChildren();
    const itemPath = (key) => `${base}/${spec.path}/${encodeURIComponent(key)}`;
    const rows = items.map((item, index) => {
      const key = spec.key(item, index);
      const label = spec.label(item);
      const edit = el("button", { type: "button", class: "edit", disabled: !canWrite,
        dataset: { key }, "aria-label": `Edit ${label}` }, "Edit");
      const remove = el("button", { type: "button", class: "delete secondary", disabled: !canWrite,
        dataset: { key }, "aria-label": `Delete ${label}` }, "Delete");
      edit.addEventListener("click", () => open(editor(spec, item, `Edit ${label}`,
        (edited) => ({ method: "PUT", path: itemPath(key), body: edited }), close)));
      remove.addEventListener("click", () => open(confirmDelete(spec, label, itemPath(key), close)));
      return [...spec.cells(item, file), el("span", { class: "row-actions" }, edit, " ", remove)];
    });
    const add = el("button", { type: "button", class: "add", disabled: !canWrite },
      `Add a ${spec.noun}`);
    add.addEventListener("click", () => open(editor(spec, {}, `New ${spec.noun}`,
      (edited) => ({ method: "POST", path: `${base}/${spec.path}`, body: edited }), close)));
    return el("section", { id: `clinic-${spec.path}`, "aria-labelledby": `clinic-${spec.path}-title` },
      el("h2", { id: `clinic-${spec.path}-title` }, `${spec.title} · ${items.length}`),
      items.length ? table([...spec.columns, ""], rows, { class: "grid" })
        : el("p", { class: "empty" }, `No ${spec.title.toLowerCase()} yet.`),
      el("div", { class: "actions" }, add), slot);
  }

  function confirmDelete(spec, label, path, close) {
    const problems = el("div", { class: "form-problems", "aria-live": "polite" });
    const yes = el("button", { type: "submit", class: "danger" }, `Delete ${label}`);
    const no = el("button", { type: "button", class: "secondary" }, "Keep it");
    no.addEventListener("click", close);
    const form = el("form", { id: `delete-${spec.path}`, class: "editor" },
      el("p", {}, `Delete ${label} from the clinic?`,
        spec.kept ? " Bookings that name it are kept; it is no longer offered." : ""),
      el("div", { class: "actions" }, yes, no), problems);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      save({ method: "DELETE", path }, problems, [yes, no]);
    });
    return form;
  }

  say(page, "Loading…");
  try {
    await load();
  } catch (error) {
    if (alive()) say(page, error.status === 404 ? "No such clinic in this workspace." : error.message, "error");
    return;
  }
  if (alive()) render();
}
