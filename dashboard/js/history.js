// History: the workspace's calls, newest or worst first, filtered, a page at a time
// (cursor), under the workspace's quality per week.

import { fmtScore, scoreBand, trendTable } from "./analysis.js";
import { api } from "./api.js";
import { el, fmtDate, fmtDuration, say, shortId } from "./dom.js";

const PAGE = 50;
const FILTERS = [
  ["started_after", "Started after", "datetime-local"],
  ["started_before", "Started before", "datetime-local"],
  ["state", "Final state", "text"],
  ["completion_reason", "Completion reason", "text"],
];

/** The query string of one page: filters that are set, the cursor when paging on. */
export function historyQuery(filters, cursor) {
  const params = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, value] of Object.entries(filters)) {
    if (value === "" || value === null || value === undefined) continue;
    params.set(name, value);
  }
  if (cursor) params.set("cursor", cursor);
  return `/api/calls?${params}`;
}

function isoOrEmpty(localValue) {
  if (!localValue) return "";
  const date = new Date(localValue);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

export function mount(root) {
  let cursor = null;
  let alive = true;
  const inputs = Object.fromEntries(FILTERS.map(([name, , type]) =>
    [name, el("input", { id: `f-${name}`, name, type })]));
  const escalated = el("select", { id: "f-escalated", name: "escalated" },
    el("option", { value: "" }, "any"), el("option", { value: "true" }, "yes"),
    el("option", { value: "false" }, "no"));
  const toolError = el("select", { id: "f-tool_error", name: "tool_error" },
    ["", "true", "false", "guard", "pms", "other"].map((v) =>
      el("option", { value: v }, v === "" ? "any" : v)));
  const qualityBelow = el("input", { id: "f-quality_below", name: "quality_below",
    type: "number", min: "1", max: "5", step: "0.5" });
  const sort = el("select", { id: "f-sort", name: "sort" },
    el("option", { value: "newest" }, "newest first"),
    el("option", { value: "worst" }, "worst quality first"));
  const form = el("form", { class: "filters" },
    FILTERS.map(([name, label]) => el("label", {}, label, inputs[name])),
    el("label", {}, "Escalated", escalated),
    el("label", {}, "Tool error", toolError),
    el("label", {}, "Quality below", qualityBelow),
    el("label", {}, "Order", sort),
    el("button", { type: "submit" }, "Apply"));
  const rows = el("tbody", { id: "history-rows" });
  const notice = el("div");
  const more = el("button", { type: "button", id: "load-more", hidden: true }, "Load more");
  const trend = el("div", { id: "trend" });
  root.append(el("section", {}, el("h1", {}, "History"),
    el("details", { open: true }, el("summary", {}, "Quality per week"), trend), form,
    el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["Call", "Started", "Duration", "Quality", "Status",
        "Completion", "Final state", "Turns", "Escalated", "Tool errors"].map((h) =>
        el("th", {}, h)))),
      rows),
    notice, more));

  function filters() {
    return {
      started_after: isoOrEmpty(inputs.started_after.value),
      started_before: isoOrEmpty(inputs.started_before.value),
      state: inputs.state.value.trim(),
      completion_reason: inputs.completion_reason.value.trim(),
      escalated: escalated.value,
      tool_error: toolError.value,
      quality_below: qualityBelow.value,
      sort: sort.value === "worst" ? "worst" : "",
    };
  }

  async function load(reset) {
    if (reset) {
      cursor = null;
      rows.replaceChildren();
    }
    more.disabled = true;
    try {
      const page = await api(historyQuery(filters(), cursor));
      if (!alive) return;
      const calls = Array.isArray(page) ? page : page.calls ?? [];
      for (const call of calls) {
        rows.append(el("tr", { class: "call-row", dataset: { callId: call.id } },
          el("td", {}, el("a", { href: `#/calls/${encodeURIComponent(call.id)}` }, shortId(call.id))),
          el("td", {}, fmtDate(call.started_at)),
          el("td", {}, fmtDuration(call.duration_s)),
          el("td", {}, el("span", { class: `badge ${scoreBand(call.quality_score)}` },
            fmtScore(call.quality_score))),
          el("td", {}, call.status ?? "—"),
          el("td", {}, call.completion_reason ?? "—"),
          el("td", {}, call.final_state ?? "—"),
          el("td", {}, call.turn_count ?? "—"),
          el("td", {}, call.escalated ? "yes" : "no"),
          el("td", {}, call.tool_errors ?? "—")));
      }
      cursor = page.next_cursor ?? null;
      more.hidden = !cursor;
      notice.replaceChildren();
      if (!rows.children.length) say(notice, "No calls match.");
    } catch (error) {
      say(notice, error.message, "error");
    } finally {
      more.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load(true);
  });
  more.addEventListener("click", () => load(false));
  api("/api/calls/quality-trend?weeks=12")
    .then((weeks) => { if (alive) trend.replaceChildren(trendTable(weeks)); })
    .catch((error) => { if (alive) say(trend, error.message, "error"); });
  load(true);
  return () => {
    alive = false;
  };
}
