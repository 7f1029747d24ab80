// The FSM state guide: the service's context graph merged with its last N calls.

import { api } from "./api.js";
import { el, fmtDate, pct, say, table } from "./dom.js";

/** A long list folded behind its count ("12 tools"). */
function list(items, noun, none) {
  if (!items.length) return el("span", { class: "muted" }, none);
  return el("details", {}, el("summary", {}, `${items.length} ${noun}`),
    el("span", { class: "muted" }, items.join(", ")));
}

function stateRow(s) {
  return [
    el("b", {}, s.name),
    s.super_states.length ? s.super_states.join(" › ") : "—",
    s.type,
    s.phases.join(", ") || "—",
    s.never_observed
      ? el("span", { class: "badge never" }, "never observed")
      : el("span", { class: "badge observed" }, `observed ${s.times_observed}×`),
    String(s.calls_reached),
    list(s.tools, "tools", "no tools"),
    el("span", { class: "muted" }, s.description),
  ];
}

export function mount(root) {
  let alive = true;
  const last = el("input", { id: "guide-last", type: "number", min: "1", max: "5000", value: "200" });
  const service = el("select", { id: "guide-service" }, el("option", { value: "" }, "default service"));
  const form = el("form", { class: "filters" },
    el("label", {}, "Last N calls", last), el("label", {}, "Service", service),
    el("button", { type: "submit" }, "Show"));
  const out = el("div", { id: "guide" });
  root.append(el("section", {}, el("h1", {}, "FSM state guide"), form, out));

  api("/api/services").then((services) => {
    if (!alive || !Array.isArray(services)) return;
    for (const s of services) service.append(el("option", { value: s.id }, s.name ?? s.id));
  }).catch(() => { /* the default service still works */ });

  async function load() {
    say(out, "Loading…");
    const params = new URLSearchParams({ last: last.value || "200" });
    if (service.value) params.set("service_id", service.value);
    try {
      const g = await api(`/api/insights/state-guide?${params}`);
      if (alive) render(g);
    } catch (error) {
      if (alive) say(out, error.message, "error");
    }
  }

  function render(g) {
    const supers = new Map(g.super_states.map((s) => [s.name, s]));
    out.replaceChildren(
      el("p", { class: "lead" },
        `Graph ${g.graph_id} v${g.graph_version} · ${g.calls_analyzed} calls`,
        g.first_started_at ? ` (${fmtDate(g.first_started_at)} – ${fmtDate(g.last_started_at)})` : "",
        ` · States: ${g.canonical_states} canonical · ${g.observed_states} observed`),
      el("h2", {}, "States"),
      table(["State", "Super-state", "Type", "Phases", "Observed", "Calls", "Allowed tools", "What it is"],
        g.states.map(stateRow), { class: "grid", id: "guide-states" }),
      el("h2", {}, "Super-states"),
      table(["Super-state", "Leaves", "Leaves observed", "Observed in leaves", "Description"],
        [...supers.values()].map((s) => [el("b", {}, s.name), s.leaves.join(", "),
          `${s.leaves_observed} / ${s.leaves.length}`, `${s.observed_total}×`,
          el("span", { class: "muted" }, `${s.description}${s.side_loop ? " (side-loop)" : ""}`)]),
        { class: "grid" }),
      el("h2", {}, `Undocumented but observed · ${g.undocumented.length}`),
      g.undocumented.length ? table(["State", "Observed", "Calls", "Last seen"],
        g.undocumented.map((u) => [el("b", {}, u.name), `${u.times_observed}×`,
          String(u.calls_reached), fmtDate(u.last_seen)]), { class: "grid", id: "guide-undocumented" })
        : el("p", { class: "empty" }, "Every state calls reached is in the graph."),
      el("h2", {}, `Triggers observed · ${g.triggers.length}`),
      table(["From", "Exit", "To", "Count", "In the graph", "Last seen"],
        g.triggers.map((t) => [t.state ?? "—", t.exit ?? "—", t.to, String(t.count),
          t.canonical ? "yes" : el("span", { class: "badge warn" }, "no"), fmtDate(t.last_seen)]),
        { class: "grid", id: "guide-triggers" }),
      el("h2", {}, "Tools"),
      el("p", { class: "muted" }, "Guard: the graph refused an eager call (not a failure). "
        + "PMS: the practice system failed. Other: timeouts, network, unknown."),
      table(["Tool", "Kind", "Calls", "OK", "Guard", "PMS", "Other", "Err %", "Last seen", "Allowed in"],
        g.tools.map((t) => [el("b", {}, t.name), t.canonical ? t.kind : el("span", { class: "badge warn" }, "not in graph"),
          String(t.calls), String(t.ok), String(t.guard), String(t.pms), String(t.other),
          pct(t.error_pct), fmtDate(t.last_seen), list(t.allowed_in, "states", "none")]),
        { class: "grid", id: "guide-tools" }),
      el("div", { class: "columns" },
        el("div", {}, el("h2", {}, "Completion reasons"),
          table(["Reason", "Calls"], g.completion_reasons.map((v) => [v.value ?? "—", String(v.count)]), { class: "grid" })),
        el("div", {}, el("h2", {}, "Final states"),
          table(["State", "Calls"], g.final_states.map((v) => [v.value ?? "—", String(v.count)]), { class: "grid" }))),
      el("h2", {}, `Phases · ${Object.keys(g.phases).length}`),
      el("dl", { class: "kv" }, Object.entries(g.phases).map(([name, text]) => [el("dt", {}, name), el("dd", {}, text)])));
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  load();
  return () => {
    alive = false;
  };
}
