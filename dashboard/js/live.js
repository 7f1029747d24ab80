// Live calls: the active-call registry polled every 2 s, and the workspace observer
// stream for what is said and where each call is right now; one call's own stream when
// it is opened.

import { api, observe } from "./api.js";
import { append, el, fmtDate, toDate, fmtEmotion, fmtLatency, fmtMs, say, shortId, table } from "./dom.js";

const POLL_MS = 2000;
const LINES_PER_CALL = 3;
const STALE_MS = 10000; // a call neither listed nor heard from for this long is gone
// Operator actions (POST /api/calls/{id}/actions/{action}): the pod running the call acts.
const ACTIONS = [["take-over", "Take over"], ["release", "Release"], ["end", "End call"]];

/** The list endpoint's calls, whichever envelope it uses. */
export function activeCalls(payload) {
  if (Array.isArray(payload)) return payload;
  return payload?.calls ?? payload?.active ?? [];
}

const lineKey = (role, text) => `line|${role}|${text}`;
const transitionKey = (t) => `transition|${t.previous_state}|${t.next_state}|${t.reason}`;
const toolKey = (name, id) => `tool|${name}|${id}`;

/**
 * `session_info` (a late joiner's snapshot of the record so far) seeds the view; each
 * seeded item then absorbs the one replayed event that says the same thing, so the
 * replay that follows adds nothing twice. A replay from `session_start` is complete
 * and replaces the snapshot.
 */
function seed(call, snapshot) {
  const active = snapshot.active ?? {};
  const record = snapshot.call ?? {};
  call.state = active.state ?? record.final_state ?? call.state;
  call.service_id ??= active.service_id ?? record.service_id ?? null;
  call.started_at ??= active.started_at ?? record.started_at ?? null;
  call.emotion = active.emotion ?? call.emotion;
  call.latency = active.latency ?? call.latency;
  call.suspended = Boolean(active.suspended);
  call.seeded = new Map();
  const keep = (key) => call.seeded.set(key, (call.seeded.get(key) ?? 0) + 1);
  call.lines = (snapshot.turns ?? []).map((t) => {
    const role = t.speaker_role === "caller" ? "caller" : "agent";
    keep(lineKey(role, t.text ?? ""));
    return { role, text: t.text ?? "" };
  });
  call.transitions = (snapshot.transitions ?? []).map((t) => {
    keep(transitionKey(t));
    return { previous_state: t.previous_state, next_state: t.next_state, reason: t.reason };
  });
  call.tools = (snapshot.tool_calls ?? []).map((t) => {
    keep(toolKey(t.name, t.tool_call_id));
    return { tool_name: t.name, call_id: t.tool_call_id, duration_ms: t.duration_ms,
             succeeded: !t.error_class, error_class: t.error_class, pending: false };
  });
}

/** True when a seeded item already shows this event (and it is used up). */
function absorbed(call, key) {
  const left = call.seeded?.get(key) ?? 0;
  if (left <= 0) return false;
  call.seeded.set(key, left - 1);
  return true;
}

/**
 * An `escalation` event into the call's list: a new one (status "open") is added; an
 * operator's acknowledge/resolve (another status, with `escalation_id`) updates the one
 * it is about, found by that id, else the oldest of its concept not yet matched to an id
 * (the open event does not carry the id), and is added only when none is there.
 */
export function foldEscalation(escalations, data) {
  if ((data.status ?? "open") !== "open") {
    const id = data.escalation_id;
    const unmatched = escalations.filter((e) => e.escalation_id == null && e.concept === data.concept);
    const target = (id != null && escalations.find((e) => e.escalation_id === id))
      || unmatched.find((e) => (e.status ?? "open") === "open") || unmatched[0];
    if (target) {
      Object.assign(target, data);
      return escalations;
    }
  }
  escalations.push({ ...data });
  return escalations;
}

/** What an observer event says about a call, folded into its live view `call`. */
export function applyEvent(call, event) {
  const data = event.data ?? {};
  switch (event.type) {
    case "session_start":
      if (call.seeded) {
        call.seeded = null;
        call.lines = [];
        call.transitions = [];
        call.tools = [];
      }
      call.started_at ??= event.ts ? new Date(event.ts * 1000).toISOString() : null;
      call.state ??= data.initial_state ?? null;
      call.service_id ??= data.service_id ?? null;
      break;
    case "session_info":
      if (event.call_id === call.call_id) seed(call, data);
      break;
    case "user_transcript":
    case "agent_transcript": {
      const role = event.type === "user_transcript" ? "caller" : "agent";
      if (role === "caller" && data.emotion_label) call.emotion = data.emotion_label;
      if (!absorbed(call, lineKey(role, data.transcript ?? ""))) {
        call.lines.push({ role, text: data.transcript ?? "" });
      }
      break;
    }
    case "state_transition":
      call.state = data.next_state ?? call.state;
      if (!absorbed(call, transitionKey(data))) call.transitions.push(data);
      break;
    case "tool_call_started":
      if (!call.tools.some((t) => t.call_id === data.call_id && t.tool_name === data.tool_name)) {
        call.tools.push({ ...data, pending: true });
      }
      break;
    case "tool_call_completed": {
      if (absorbed(call, toolKey(data.tool_name, data.call_id))) break;
      const open = call.tools.find((t) => t.pending && t.call_id === data.call_id
        && t.tool_name === data.tool_name);
      if (open) Object.assign(open, data, { pending: false });
      else call.tools.push({ ...data, pending: false });
      break;
    }
    case "latency":
      call.latency = data;
      break;
    case "emotion":
      call.emotion = data;
      break;
    case "escalation":
      foldEscalation(call.escalations, data);
      break;
    case "session_end":
      call.ended = true;
      call.completion_reason = data.completion_reason ?? null;
      call.state = data.final_state ?? call.state;
      break;
    default:
      break;
  }
  return call;
}

export function newLiveCall(callId, from = {}) {
  return {
    call_id: callId, service_id: null, started_at: null, state: null, emotion: null,
    latency: null, ended: false, lines: [], transitions: [], tools: [], escalations: [],
    ...from,
  };
}

function statusBadge(node, state) {
  node.textContent = state;
  node.className = `badge stream-${state}`;
}

export function mountList(root) {
  const calls = new Map();
  const streamStatus = el("span", { id: "stream-status", class: "badge" }, "connecting");
  const notice = el("div");
  const body = el("div", { id: "live-calls" });
  root.append(el("section", {},
    el("h1", {}, "Live calls ", streamStatus), notice, body));

  function render() {
    const rows = [...calls.values()]
      .sort((a, b) => (toDate(b.started_at)?.getTime() ?? 0) - (toDate(a.started_at)?.getTime() ?? 0))
      .map((call) => [
        el("a", { href: `#/live/${encodeURIComponent(call.call_id)}`, class: "call-link",
                  dataset: { callId: call.call_id } }, shortId(call.call_id)),
        call.ended ? el("span", { class: "badge ended" }, "ended")
          : call.suspended ? el("span", { class: "badge warn" }, "suspended")
          : el("span", { class: "badge live" }, "live"),
        fmtDate(call.started_at),
        call.state ?? "—",
        fmtEmotion(call.emotion),
        fmtLatency(call.latency),
        el("div", { class: "live-lines" }, call.lines.slice(-LINES_PER_CALL).map((line) =>
          el("div", { class: `line ${line.role}` }, el("b", {}, `${line.role}: `), line.text))),
      ]);
    body.replaceChildren(rows.length
      ? table(["Call", "", "Started", "State", "Emotion", "Latency", "Said last"], rows,
        { class: "grid" })
      : el("p", { class: "empty" }, "No calls in progress."));
  }

  /** Registry entries into the list; the ids it saw. */
  function merge(entries) {
    const seen = new Set();
    for (const entry of entries) {
      seen.add(entry.call_id);
      const call = calls.get(entry.call_id) ?? newLiveCall(entry.call_id);
      Object.assign(call, {
        service_id: entry.service_id ?? call.service_id,
        started_at: entry.started_at ?? call.started_at,
        state: entry.state ?? call.state,
        emotion: entry.emotion ?? call.emotion,
        latency: entry.latency ?? call.latency,
        suspended: Boolean(entry.suspended),
      });
      calls.set(entry.call_id, call);
    }
    return seen;
  }

  async function poll() {
    try {
      const seen = merge(activeCalls(await api("/api/calls/active")));
      const stale = Date.now() - STALE_MS;
      for (const [id, call] of calls) {
        if (!seen.has(id) && (call.ended || (call.touched ?? 0) < stale)) calls.delete(id);
      }
      notice.replaceChildren();
      render();
    } catch (error) {
      say(notice, `active calls: ${error.message}`, "error");
    }
  }

  const stream = observe("/api/observe", (event) => {
    if (event.type === "session_info" && Array.isArray(event.data?.active_calls)) {
      merge(event.data.active_calls);
      render();
      return;
    }
    if (!event.call_id || event.type === "dropped") return;
    const call = calls.get(event.call_id) ?? newLiveCall(event.call_id);
    call.touched = Date.now();
    calls.set(event.call_id, applyEvent(call, event));
    render();
  }, (state) => statusBadge(streamStatus, state));

  render();
  poll();
  const timer = setInterval(poll, POLL_MS);
  return () => {
    clearInterval(timer);
    stream.close();
  };
}

export function mountCall(root, callId) {
  const call = newLiveCall(callId);
  const streamStatus = el("span", { id: "stream-status", class: "badge" }, "connecting");
  const summary = el("div", { class: "summary" });
  const transcript = el("ol", { id: "live-transcript", class: "transcript" });
  const transitions = el("ol", { id: "live-transitions", class: "events" });
  const tools = el("ol", { id: "live-tools", class: "events" });
  const dropped = el("div");
  const actionNotice = el("div", { id: "action-status" });
  const actions = el("div", { class: "actions" }, ACTIONS.map(([action, label]) =>
    el("button", { type: "button", class: "action", dataset: { action },
                   onclick: () => act(action) }, label)));
  root.append(el("section", {},
    el("h1", {}, `Call ${shortId(callId)} `, streamStatus),
    summary, actions, actionNotice, dropped,
    el("div", { class: "columns" },
      el("div", {}, el("h2", {}, "Transcript"), transcript),
      el("div", {}, el("h2", {}, "State transitions"), transitions,
        el("h2", {}, "Tool calls"), tools))));

  function render() {
    summary.replaceChildren();
    append(summary, [
      el("span", {}, "State: ", el("b", { id: "live-state" }, call.state ?? "—")),
      el("span", {}, "Emotion: ", fmtEmotion(call.emotion)),
      el("span", {}, "Latency: ", fmtLatency(call.latency)),
      call.ended
        ? el("a", { href: `#/calls/${encodeURIComponent(callId)}`, id: "open-record" },
          `Ended (${call.completion_reason ?? "—"}): open the record`)
        : null]);
    transcript.replaceChildren(...call.lines.map((line) =>
      el("li", { class: `line ${line.role}` }, el("b", {}, `${line.role}: `), line.text)));
    transitions.replaceChildren(...call.transitions.map((t) =>
      el("li", {}, `${t.previous_state ?? "—"} → ${t.next_state ?? "—"}`,
        el("span", { class: "muted" }, ` (${t.reason ?? "—"})`))));
    tools.replaceChildren(...call.tools.map((t) =>
      el("li", { class: t.pending ? "pending" : t.succeeded ? "ok" : "error" },
        t.tool_name ?? "—", " ",
        el("span", { class: "muted" }, t.pending ? "running…"
          : t.succeeded ? `ok, ${fmtMs(t.duration_ms)}`
          : `${t.error_class ?? "error"}, ${fmtMs(t.duration_ms)}`))));
  }

  async function act(action) {
    say(actionNotice, `Sending ${action}…`);
    try {
      const sent = await api(`/api/calls/${encodeURIComponent(callId)}/actions/${action}`,
        { method: "POST" });
      say(actionNotice, `${sent.action} sent to the pod running the call.`);
    } catch (error) {
      say(actionNotice, `${action}: ${error.message}`, "error");
    }
  }

  const stream = observe(`/api/calls/${encodeURIComponent(callId)}/observe`, (event) => {
    if (event.type === "dropped") {
      say(dropped, `${event.count} events were dropped (this view fell behind).`, "error");
      return;
    }
    applyEvent(call, event);
    render();
  }, (state) => statusBadge(streamStatus, state));
  render();
  return () => stream.close();
}
