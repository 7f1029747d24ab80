// DOM helpers: every piece of data goes in as a text node or an attribute, never as HTML.

/** el("a", {href: "#/x", class: "c", onclick: fn}, "text", child) */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

/** Appends children (nodes, strings, numbers; null and false skipped) as nodes/text. */
export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** A table from column headers and rows of cells (strings or nodes). */
export function table(headers, rows, attrs = {}) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))));
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "—";
}

/** A Date from an ISO string, or a Unix time in seconds (the registry's) or ms; else null. */
export function toDate(value) {
  if (value === null || value === undefined || value === "") return null;
  const date = typeof value === "number" ? new Date(value < 1e11 ? value * 1000 : value)
    : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

export function fmtDate(value) {
  if (value === null || value === undefined || value === "") return "—";
  const date = toDate(value);
  return date ? date.toLocaleString() : String(value);
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(Number(ms))) return "—";
  return `${Math.round(Number(ms))} ms`;
}

export function fmtClock(ms) {
  if (ms === null || ms === undefined) return "—";
  const s = Math.max(0, Math.floor(Number(ms) / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

export function fmtDuration(seconds) {
  return seconds === null || seconds === undefined ? "—" : fmtClock(Number(seconds) * 1000);
}

/** An emotion as the API gives it: a label, or {dominant|label, valence, arousal}. */
export function fmtEmotion(value) {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value !== "object") return String(value);
  const label = value.dominant ?? value.label ?? value.emotion ?? "—";
  const valence = typeof value.valence === "number" ? ` (${value.valence.toFixed(2)})` : "";
  return `${label}${valence}`;
}

/** A latency as the API gives it: milliseconds, or {e2e_ttfb_ms|audio_ttfb_ms|...}. */
export function fmtLatency(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "object") return fmtMs(value);
  return fmtMs(value.e2e_ttfb_ms ?? value.audio_ttfb_ms ?? value.last_ms ?? value.p50_ms
    ?? value.engine_ms);
}

export function pct(value) {
  return value === null || value === undefined ? "—" : `${Number(value).toFixed(1)}%`;
}

/** A short status line in `node`: kind is "info" or "error". */
export function say(node, text, kind = "info") {
  node.replaceChildren(el("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text));
}
