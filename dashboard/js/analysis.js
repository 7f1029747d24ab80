// After the call: a call's summary and its five quality scores (each line's turns jump to
// the transcript), and the workspace's quality per week.

import { el, table } from "./dom.js";

export const DIMENSIONS = [
  ["task_completion", "Task completion"],
  ["information_accuracy", "Information accuracy"],
  ["conversation_flow", "Conversation flow"],
  ["error_recovery", "Error recovery"],
  ["caller_experience", "Caller experience"],
];

const SUMMARY_PARTS = [
  ["wanted", "Wanted"],
  ["done", "Done"],
  ["left_for_person", "Left for a person"],
  ["concerns", "Concerns"],
];

/** A score as text with its band: 1.0–2.4 low, 2.5–3.4 fair, 3.5–5 good. */
export function scoreBand(score) {
  if (score === null || score === undefined) return "none";
  if (score < 2.5) return "low";
  return score < 3.5 ? "fair" : "good";
}

export function fmtScore(score) {
  return score === null || score === undefined ? "—" : Number(score).toFixed(1);
}

function turnLinks(turns, jump) {
  if (!Array.isArray(turns) || !turns.length) return null;
  return el("span", { class: "turn-links" }, " (turn ",
    turns.map((seq, i) => {
      const link = el("button", { type: "button", class: "link", dataset: { seq: String(seq) } },
        String(seq));
      link.addEventListener("click", () => jump(seq));
      return i ? [", ", link] : link;
    }), ")");
}

/** The analysis section of a call's page; `jump(seq)` shows that turn. */
export function analysisSection(analysis, jump) {
  const section = el("section", { id: "analysis" });
  if (!analysis) {
    section.append(el("h2", {}, "Summary and quality"),
      el("p", { class: "empty" }, "Not analysed yet."));
    return section;
  }
  const overall = el("span", { id: "quality-score", class: `badge ${scoreBand(analysis.quality_score)}` },
    fmtScore(analysis.quality_score));
  section.append(el("h2", {}, "Summary and quality ", overall),
    el("p", { class: "muted" }, `Analysed by ${analysis.analyst}`,
      analysis.fallback ? ` (the model's analysis was not kept: ${analysis.fallback})` : ""));
  const summary = el("dl", { id: "call-summary", class: "summary-list" });
  for (const [key, label] of SUMMARY_PARTS) {
    const lines = analysis.summary?.[key] ?? [];
    summary.append(el("dt", {}, label), el("dd", { dataset: { part: key } }, lines.length
      ? el("ul", {}, lines.map((line) => el("li", {},
        line.kind && key === "concerns" ? el("b", {}, `${line.kind}: `) : null,
        line.text, turnLinks(line.turns, jump))))
      : el("span", { class: "muted" }, "—")));
  }
  section.append(summary);
  section.append(table(["Dimension", "Score", "Why"], DIMENSIONS.map(([key, label]) => {
    const score = analysis.quality?.[key] ?? {};
    return [label, el("span", { class: `badge ${scoreBand(score.score)}` }, score.score ?? "—"),
      el("span", {}, score.reason ?? "", turnLinks(score.turns, jump))];
  }), { class: "grid", id: "quality-dimensions" }));
  return section;
}

/** The weekly trend table (oldest week first, as the API gives it). */
export function trendTable(weeks) {
  if (!weeks.length) return el("p", { class: "empty", id: "quality-trend" }, "No analysed calls yet.");
  return table(["Week of", "Calls", "Average", "Low", ...DIMENSIONS.map(([, label]) => label)],
    weeks.map((week) => [
      new Date(week.week_start).toLocaleDateString(undefined, { timeZone: "UTC" }),
      String(week.calls),
      el("span", { class: `badge ${scoreBand(week.average)}` }, fmtScore(week.average)),
      String(week.low),
      ...DIMENSIONS.map(([key]) => fmtScore(week.dimensions?.[key])),
    ]), { class: "grid", id: "quality-trend" });
}
