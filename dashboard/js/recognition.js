// Recognition: words the real-time speech recognizer kept missing, proposed per clinic as
// keyterms with their evidence (what it wrote instead, in which calls). An operator
// accepts one (the clinic's next call is given it) or rejects it (never proposed again).

import { api } from "./api.js";
import { el, fmtClock, fmtDate, say, shortId, table } from "./dom.js";
import * as role from "./role.js";

const STATUSES = ["proposed", "accepted", "rejected"];

/** What the recognizer wrote instead, each once: "(nothing)" for a word it dropped. */
function heardAs(evidence) {
  const heard = [...new Set(evidence.map((e) => e.heard || "(nothing)"))];
  return heard.map((h) => el("div", { class: "heard" }, `“${h}”`));
}

function evidenceLinks(evidence) {
  return evidence.map((e) => el("div", {},
    el("a", { href: `#/calls/${encodeURIComponent(e.call_id)}` }, shortId(e.call_id)),
    ` at ${fmtClock(e.at_ms)}`, el("span", { class: "muted" }, ` (${e.source})`)));
}

export function mount(root) {
  let alive = true;
  const operator = role.can("operator");
  const status = el("div", { id: "recognition-status" });
  const lists = Object.fromEntries(STATUSES.map((s) => [s, el("div", { id: `suggestions-${s}` })]));
  root.append(el("section", { id: "recognition" },
    el("h1", {}, "Recognition"),
    el("p", { class: "muted" }, "Words the real-time recognizer missed, as the call's "
      + "recording re-transcribed heard them. Accepting one adds it to the clinic's keyterms "
      + "for its next call; a rejected word is not proposed again."),
    operator ? null : el("p", { class: "muted", id: "recognition-read-only" },
      "Deciding needs operator rights; this key can only look."),
    status,
    el("h2", {}, "Proposed"), lists.proposed,
    el("h2", {}, "Accepted"), lists.accepted,
    el("h2", {}, "Rejected"), lists.rejected));

  function decisionButton(suggestion, verb, text) {
    const button = el("button", {
      type: "button", class: verb, disabled: !operator, dataset: { id: suggestion.id },
    }, text);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await api(`/api/stt-suggestions/${encodeURIComponent(suggestion.id)}/${verb}`,
          { method: "POST" });
        say(status, `“${suggestion.term}” ${verb}ed.`);
        load();
      } catch (error) {
        button.disabled = false;
        say(status, error.message, "error");
      }
    });
    return button;
  }

  /** One table per clinic of the suggestions of one status. */
  function render(container, state, rows, names) {
    if (!rows.length) {
      container.replaceChildren(el("p", { class: "empty" }, `Nothing ${state}.`));
      return;
    }
    const byService = new Map();
    for (const row of rows) {
      if (!byService.has(row.service_id)) byService.set(row.service_id, []);
      byService.get(row.service_id).push(row);
    }
    const headers = state === "proposed"
      ? ["Term", "Missed in", "Heard as", "Evidence", "Last seen", ""]
      : ["Term", "Missed in", "Heard as", "Decided", "By"];
    container.replaceChildren(...[...byService].map(([serviceId, suggestions]) =>
      el("div", { class: "service-suggestions", dataset: { serviceId } },
        el("h3", {}, names.get(serviceId) ?? shortId(serviceId)),
        table(headers, suggestions.map((s) => {
          const common = [el("b", { class: "term" }, s.term),
            `${s.calls_missed} call${s.calls_missed === 1 ? "" : "s"}`, heardAs(s.evidence)];
          return state === "proposed"
            ? [...common, evidenceLinks(s.evidence), fmtDate(s.last_seen),
              [decisionButton(s, "accept", "Accept"), " ", decisionButton(s, "reject", "Reject")]]
            : [...common, fmtDate(s.decided_at), s.decided_by ?? "—"];
        }), { class: "grid suggestions", dataset: { status: state } }))));
  }

  async function load() {
    try {
      const [services, ...found] = await Promise.all([
        api("/api/services"),
        ...STATUSES.map((s) => api(`/api/stt-suggestions?status=${s}`)),
      ]);
      if (!alive) return;
      const names = new Map(services.map((s) => [s.id, s.name]));
      STATUSES.forEach((state, index) => render(lists[state], state, found[index], names));
    } catch (error) {
      if (alive) say(status, error.message, "error");
    }
  }

  load();
  return () => {
    alive = false;
  };
}
