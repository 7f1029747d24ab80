// Review queue: events the after-call verification flagged and bookings the practice
// system never took (with the action needed), and open escalations an operator can
// acknowledge.

import { api } from "./api.js";
import { el, fmtClock, fmtDate, say, shortId, table } from "./dom.js";

const OPERATOR_KEY = "clinic-dashboard.operator";

/** One verification stage's verdict: {stage, verdict, reason, judge}. */
function noteLine(note) {
  if (!note || typeof note !== "object") return el("div", {}, String(note));
  const head = [note.stage, note.verdict].filter(Boolean).join(": ");
  return el("div", { class: "note" }, el("b", {}, head || "note"),
    note.reason ? ` — ${note.reason}` : "",
    note.judge ? el("span", { class: "muted" }, ` (${note.judge})`) : null);
}

export function mount(root) {
  let alive = true;
  const operator = el("input", {
    id: "operator", type: "text", maxlength: "80",
    value: sessionStorage.getItem(OPERATOR_KEY) ?? "operator",
  });
  operator.addEventListener("change", () => sessionStorage.setItem(OPERATOR_KEY, operator.value.trim()));
  const escalations = el("div", { id: "escalations" });
  const flagged = el("div", { id: "review-queue" });
  root.append(el("section", {}, el("h1", {}, "Review queue"),
    el("label", {}, "Acting as ", operator),
    el("h2", {}, "Open escalations"), escalations,
    el("h2", {}, "Flagged events"), flagged));

  const callLink = (id) => id
    ? el("a", { href: `#/calls/${encodeURIComponent(id)}` }, shortId(id)) : "—";

  /** `path`'s rows as a table in `container` (or `empty`); an error said there. */
  async function loadTable(container, path, headers, rowOf, empty) {
    try {
      const rows = await api(path);
      if (!alive) return;
      container.replaceChildren(rows.length
        ? table(headers, rows.map(rowOf), { class: "grid" })
        : el("p", { class: "empty" }, empty));
    } catch (error) {
      if (alive) say(container, error.message, "error");
    }
  }

  function acknowledgeButton(e) {
    const button = el("button", { type: "button", class: "ack", dataset: { id: String(e.id) } }, "Acknowledge");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await api(`/api/escalations/${encodeURIComponent(e.id)}/acknowledge`, {
          method: "POST", body: { operator: operator.value.trim() || "operator" },
        });
        loadEscalations();
      } catch (error) {
        button.disabled = false;
        say(escalations, error.message, "error");
      }
    });
    return button;
  }

  const loadEscalations = () => loadTable(escalations, "/api/escalations?status=open",
    ["Call", "Concept", "Severity", "At", "Reason", ""],
    (e) => [callLink(e.call_id), e.concept, e.severity, fmtClock(e.at_ms), e.reason ?? "", acknowledgeButton(e)],
    "No open escalations.");

  const loadFlagged = () => loadTable(flagged, "/api/review-queue",
    ["Call", "Type", "Summary", "Written by", "When", "Why flagged", "Action needed"],
    (e) => [callLink(e.call_id), e.type, e.summary, e.written_by, fmtDate(e.occurred_at),
      (e.notes ?? []).map(noteLine), e.review_action ?? ""],
    "Nothing waits for review.");

  loadEscalations();
  loadFlagged();
  return () => {
    alive = false;
  };
}
