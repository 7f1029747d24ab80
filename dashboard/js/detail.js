// One call's record: summary, the recording (waveform, click-to-seek, stereo playback),
// the transcript with per-turn emotion and timings where every word seeks the audio and
// the word being played is highlighted, verification, tools, transitions, escalations.

import { analysisSection } from "./analysis.js";
import { api, apiBlob, ApiError } from "./api.js";
import {
  el, fmtClock, fmtDate, fmtDuration, fmtEmotion, fmtMs, pct, say, shortId, table,
} from "./dom.js";
import * as role from "./role.js";

const WORD_TAIL_MS = 150; // a word stays lit this long after its end (gaps between words)

function speechSpan(turn) {
  return turn.speaker_role === "caller"
    ? [turn.user_speech_start_ms, turn.user_speech_end_ms]
    : [turn.agent_speech_start_ms, turn.agent_speech_end_ms];
}

/**
 * A turn's words with their times on the recording's clock: the stored word timings when
 * the provider gave them, else spread over the turn's speech in proportion to their
 * length (marked estimated), else without times.
 */
export function turnWords(turn) {
  if (Array.isArray(turn.words) && turn.words.length) {
    return turn.words.map((w) => ({
      word: String(w.word ?? ""), start_ms: w.start_ms ?? null, end_ms: w.end_ms ?? null,
      estimated: false,
    }));
  }
  const tokens = String(turn.text ?? "").split(/\s+/).filter(Boolean);
  const [start, end] = speechSpan(turn);
  if (!Number.isFinite(start) || !Number.isFinite(end) || end <= start) {
    return tokens.map((word) => ({ word, start_ms: null, end_ms: null, estimated: true }));
  }
  const total = tokens.reduce((n, t) => n + t.length + 1, 0);
  let offset = 0;
  return tokens.map((word) => {
    const from = start + ((end - start) * offset) / total;
    offset += word.length + 1;
    const to = start + ((end - start) * offset) / total;
    return { word, start_ms: Math.round(from), end_ms: Math.round(to), estimated: true };
  });
}

/** The index of the word playing at `ms` in `words` (sorted by start), or -1. */
export function wordAt(words, ms) {
  let lo = 0;
  let hi = words.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (words[mid].start_ms <= ms) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0) return -1;
  const word = words[found];
  const end = word.end_ms ?? word.start_ms;
  return ms <= end + WORD_TAIL_MS ? found : -1;
}

function drawWaveform(canvas, wave, fraction) {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== width) canvas.width = width;
  if (canvas.height !== height) canvas.height = height;
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, width, height);
  const mid = height / 2;
  const style = getComputedStyle(canvas);
  const colour = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  if (wave && wave.points > 0) {
    const step = width / wave.points;
    ctx.fillStyle = colour("--caller", "#2b6cb0");
    wave.caller.forEach((v, i) => ctx.fillRect(i * step, mid - v * mid, Math.max(1, step - 0.5), v * mid));
    ctx.fillStyle = colour("--agent", "#2f855a");
    wave.agent.forEach((v, i) => ctx.fillRect(i * step, mid, Math.max(1, step - 0.5), v * mid));
  }
  ctx.fillStyle = colour("--muted", "#888");
  ctx.fillRect(0, mid, width, 1);
  if (Number.isFinite(fraction)) {
    ctx.fillStyle = colour("--playhead", "#c53030");
    ctx.fillRect(Math.round(fraction * width), 0, Math.max(1, ratio * 2), height);
  }
}

function timingChips(turn) {
  const chips = [
    ["engine", turn.engine_ms], ["nav", turn.nav_ms], ["render", turn.render_ms],
    ["audio ttfb", turn.audio_ttfb_ms],
  ].filter(([, v]) => v !== null && v !== undefined);
  const [start, end] = speechSpan(turn);
  return el("span", { class: "chips" },
    Number.isFinite(start) ? el("span", { class: "chip" }, `${fmtClock(start)}–${fmtClock(end)}`) : null,
    chips.map(([name, value]) => el("span", { class: "chip" }, `${name} ${fmtMs(value)}`)),
    turn.emotion ? el("span", { class: "chip emotion" },
      fmtEmotion({ label: turn.emotion, valence: turn.valence })) : null,
    turn.tone ? el("span", { class: "chip" }, `tone ${turn.tone}`) : null,
    turn.interrupted ? el("span", { class: "chip warn" }, "interrupted") : null);
}

/** "96.0% (local:pocketsphinx)", or "not verified". */
export function accuracyText(accuracy, verifier) {
  if (accuracy === null || accuracy === undefined) return "not verified";
  return `${pct(accuracy * 100)}${verifier ? ` (${verifier})` : ""}`;
}

function keyValues(object) {
  if (!object || typeof object !== "object") return el("p", { class: "muted" }, "—");
  return el("dl", { class: "kv" }, Object.entries(object).map(([k, v]) => [
    el("dt", {}, k), el("dd", {}, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)),
  ]));
}

export function mount(root, callId) {
  let alive = true;
  let blobUrl = null;
  let frame = null;
  const base = `/api/calls/${encodeURIComponent(callId)}`;
  const section = el("section", { id: "call-detail" }, el("h1", {}, `Call ${shortId(callId)}`));
  const notice = el("div");
  section.append(notice);
  root.append(section);
  say(notice, "Loading…");

  const cleanup = () => {
    alive = false;
    if (frame) cancelAnimationFrame(frame);
    if (blobUrl) URL.revokeObjectURL(blobUrl);
  };

  (async () => {
    let call;
    try {
      call = await api(base);
    } catch (error) {
      if (alive) say(notice, error.message, "error");
      return;
    }
    if (!alive) return;
    notice.replaceChildren();

    section.append(el("div", { class: "summary" },
      el("span", {}, "Started: ", fmtDate(call.started_at)),
      el("span", {}, "Duration: ", fmtDuration(call.duration_s)),
      el("span", {}, "Status: ", call.status ?? "—"),
      el("span", {}, "Completion: ", call.completion_reason ?? "—"),
      el("span", {}, "Final state: ", call.final_state ?? "—"),
      call.safety?.suspended ? el("span", { class: "badge warn" }, "agent suspended") : null));
    section.append(analysisSection(call.analysis, (seq) => {
      const turn = section.querySelector(`li.turn[data-seq="${seq}"]`);
      if (!turn) return;
      turn.scrollIntoView({ block: "center" });
      turn.classList.add("flash");
      setTimeout(() => turn.classList.remove("flash"), 1500);
    }));

    // --- Recording ---------------------------------------------------------------
    const audio = el("audio", { id: "player", controls: true, preload: "auto" });
    const canvas = el("canvas", { id: "waveform", class: "waveform", title: "Click to seek" });
    const clock = el("span", { id: "clock", class: "muted" }, "");
    const recording = el("div", { class: "recording" },
      el("h2", {}, "Recording ",
        el("span", { class: "legend caller" }, "caller (left)"), " ",
        el("span", { class: "legend agent" }, "agent (right)")),
      canvas, el("div", { class: "player-row" }, audio, clock));
    const recordingNotice = el("div");
    recording.append(recordingNotice);
    section.append(recording);
    let wave = null;

    // --- Transcript with clickable words ---------------------------------------
    const timeline = []; // {start_ms, end_ms, node}, sorted by start
    const transcript = el("ol", { id: "transcript", class: "transcript" });
    for (const turn of call.turns ?? []) {
      const words = turnWords(turn);
      const text = el("p", { class: "words" });
      words.forEach((word, i) => {
        if (i) text.append(" ");
        const timed = Number.isFinite(word.start_ms);
        const span = el(timed ? "button" : "span", {
          type: timed ? "button" : null,
          class: `word${word.estimated ? " estimated" : ""}`,
          dataset: timed ? { startMs: String(word.start_ms) } : {},
          title: timed ? fmtClock(word.start_ms) : null,
        }, word.word);
        if (timed) {
          span.addEventListener("click", () => seek(word.start_ms / 1000));
          timeline.push({ start_ms: word.start_ms, end_ms: word.end_ms, node: span });
        }
        text.append(span);
      });
      transcript.append(el("li", { class: `turn ${turn.speaker_role}`, dataset: { seq: String(turn.seq) } },
        el("div", { class: "turn-head" }, el("b", {}, turn.speaker_role), timingChips(turn)), text));
    }
    timeline.sort((a, b) => a.start_ms - b.start_ms);
    section.append(el("h2", {}, "Transcript"),
      transcript.children.length ? transcript : el("p", { class: "empty" }, "No turns."));

    let lit = null;
    function paint() {
      const ms = audio.currentTime * 1000;
      const index = wordAt(timeline, ms);
      const node = index >= 0 ? timeline[index].node : null;
      if (node !== lit) {
        lit?.classList.remove("playing");
        node?.classList.add("playing");
        lit = node;
      }
      const total = Number.isFinite(audio.duration) && audio.duration > 0
        ? audio.duration : (wave?.duration_ms ?? 0) / 1000;
      clock.textContent = `${fmtClock(ms)} / ${fmtClock(total * 1000)}`;
      drawWaveform(canvas, wave, total > 0 ? audio.currentTime / total : NaN);
    }
    function loop() {
      paint();
      frame = audio.paused ? null : requestAnimationFrame(loop);
    }
    function seek(seconds) {
      if (!audio.src) return;
      audio.currentTime = Math.max(0, seconds);
      paint();
    }
    audio.addEventListener("play", () => { if (!frame) frame = requestAnimationFrame(loop); });
    for (const name of ["pause", "seeked", "timeupdate", "loadedmetadata"]) {
      audio.addEventListener(name, paint);
    }
    canvas.addEventListener("click", (event) => {
      const total = Number.isFinite(audio.duration) ? audio.duration : (wave?.duration_ms ?? 0) / 1000;
      const rect = canvas.getBoundingClientRect();
      if (total > 0 && rect.width > 0) seek(((event.clientX - rect.left) / rect.width) * total);
    });

    if (call.has_recording) {
      const points = Math.max(100, Math.min(2000, Math.round(canvas.clientWidth || 800)));
      api(`${base}/recording/waveform?points=${points}`)
        .then((w) => { if (alive) { wave = w; paint(); } })
        .catch((error) => { if (alive) say(recordingNotice, `waveform: ${error.message}`, "error"); });
      apiBlob(`${base}/recording/stereo`)
        .then((blob) => {
          if (!alive) return;
          blobUrl = URL.createObjectURL(blob);
          audio.src = blobUrl;
          audio.dataset.ready = "true";
        })
        .catch((error) => { if (alive) say(recordingNotice, `recording: ${error.message}`, "error"); });
    } else {
      say(recordingNotice, "This call has no recording (a text call).");
      audio.hidden = true;
    }
    paint();

    // --- Verification ---------------------------------------------------------
    const accuracy = el("span", { id: "accuracy" },
      accuracyText(call.transcript_accuracy, call.transcript_verifier));
    const verified = el("p", { id: "verified-transcript", class: "muted" }, call.verified_transcript ?? "");
    const verifyNotice = el("div");
    const mayVerify = role.can("operator");
    const verifyButton = el("button", {
      type: "button", id: "verify", disabled: !mayVerify,
      title: mayVerify ? null : "Needs an operator key",
    }, "Verify transcript");
    verifyButton.addEventListener("click", async () => {
      verifyButton.disabled = true;
      say(verifyNotice, "Re-transcribing the recording…");
      try {
        const result = await api(`${base}/verify-transcript`, { method: "POST" });
        accuracy.textContent = accuracyText(result.accuracy ?? result.transcript_accuracy,
          result.verifier ?? result.transcript_verifier);
        verified.textContent = result.verified_transcript ?? result.transcript ?? "";
        verifyNotice.replaceChildren();
      } catch (error) {
        say(verifyNotice, error instanceof ApiError ? error.message : String(error), "error");
      } finally {
        verifyButton.disabled = false;
      }
    });
    section.append(el("h2", {}, "Transcript verification"),
      el("p", {}, "Accuracy against the recording (1 − WER): ", accuracy, " ", verifyButton),
      verifyNotice, verified);

    // --- Tools, transitions, escalations, emotion, events ---------------------
    const tools = call.tool_calls ?? [];
    section.append(el("h2", {}, "Tool calls"), tools.length ? table(
      ["Tool", "At", "Duration", "Outcome", "Message"],
      tools.map((t) => [t.name, fmtClock(t.started_ms), fmtMs(t.duration_ms),
        el("span", { class: t.error_class ? "error" : "ok" }, t.error_class ?? "ok"),
        t.error_message ?? ""]), { class: "grid", id: "tool-calls" }) : el("p", { class: "empty" }, "None."));
    const transitions = call.transitions ?? call.state_transitions ?? [];
    section.append(el("h2", {}, "State transitions"), transitions.length ? table(
      ["#", "At", "From", "To", "Exit"],
      transitions.map((t) => [t.seq, fmtClock(t.at_ms), t.previous_state ?? "—", t.next_state,
        t.reason ?? "—"]), { class: "grid", id: "transitions" }) : el("p", { class: "empty" }, "None."));
    const escalations = call.escalations ?? [];
    section.append(el("h2", {}, "Escalations"), escalations.length ? table(
      ["Concept", "Severity", "At", "Status", "Acknowledged by", "Reason"],
      escalations.map((e) => [e.concept, e.severity, fmtClock(e.at_ms), e.status ?? "—",
        e.acknowledged_by ?? "—", e.reason ?? ""]), { class: "grid" }) : el("p", { class: "empty" }, "None."));
    section.append(el("h2", {}, "Emotional summary"), keyValues(call.emotional_summary));
    const events = call.events ?? [];
    section.append(el("details", {}, el("summary", {}, `Events (${events.length})`),
      table(["#", "At", "Type", "Data"], events.map((e) => [e.seq, fmtClock(e.at_ms), e.type,
        el("code", {}, JSON.stringify(e.data ?? {}))]), { class: "grid" })));
  })();

  return cleanup;
}
