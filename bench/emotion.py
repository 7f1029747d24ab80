"""What the emotion layer costs, on the voice path and beside it.

Budgets: the emotion tap adds < 0.1 ms per audio frame on the voice path; the local
analyzer processes a 2 s segment in < 20 ms. Three measurements:

1. The tap per 20 ms caller frame (8 kHz: 320 bytes; 16 kHz: 640 bytes). The tap sits
   beside STT on every caller frame, so whatever `EmotionTapProcessor.process_frame` does beyond
   forwarding (the type checks, appending to the 2 s segment, the bounded queue put at
   each boundary) is paid 50 times a second per call. Each run is a started Pipecat
   pipeline `[processor, sink]` in a `PipelineWorker`, fed the way a transport feeds its
   next processor (`queue_frame`), with a final transcript every 5 s of audio. The
   processor is either a plain pass-through or the tap with its background workers on
   the real offline providers (`LocalAudioProvider`, `LocalTextProvider`), or on an audio
   provider that sleeps 1 s per segment (it must not slow the frames: it gets dropped
   segments instead). Two clocks per caller frame: the processor's own `process_frame`
   (including its push to the sink's queue), and queue → sink arrival, which also sees
   what the workers cost the event loop (the prosody thread holding the GIL, the
   transcript analysis run inline). Frames are paced faster than real time (default
   20×: one per 1 ms), so a 2 s segment boundary comes every 100 ms and the analyzer
   runs 20× as often as in a call: a conservative load, and what makes the slow
   provider fall behind. Pass-through and tap runs alternate so drifts hit both alike.
2. The local prosody analyzer per 2 s segment (`LocalProsodyAnalyzer.analyze`, what
   the provider runs in a thread) on eSpeak NG speech, calm and agitated voices, at
   8 and 16 kHz, and on silence; and once through `LocalAudioProvider.analyze` as the
   tap's worker awaits it (thread hand-off included). Then beside a busy event loop:
   the thread and the loop share the GIL, so the analysis's wall time grows with the
   loop's load and the loop stalls while the analysis holds the GIL.
3. The per-turn emotion work (once per caller turn, never per frame): the words'
   analysis, a snapshot of a full 30 s window, the steering block, the tone chain and
   the filler decision.

    python -m bench.emotion [--reps 5] [--seconds 60] [--frame-interval-ms 1]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import asyncio
import gc
import itertools
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loguru import logger
from pipecat.frames.frames import EndFrame, Frame, InputAudioRawFrame, TranscriptionFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from bench.harness import FRAME_MS, percentile
from bench.report import measured_line, write_section
from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from call.voice_settings import VoiceSettings
from lib import event_loop
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.emotion_tap_processor import (
    MAX_AUDIO_SEGMENTS,
    SEGMENT_S,
    EmotionTapProcessor,
)
from processors.emotion.fillers import FillerPicker
from processors.emotion.state import EmotionalState
from processors.emotion.steering import session_steering
from processors.emotion.tone import choose_tone
from services.emotion.dimensions import emotion_table
from services.emotion.reading import EmotionReading, Source
from services.espeak.engine import VoiceShape, synthesize_pcm
from services.prosody.emotion import LocalAudioProvider, ProsodyPool, segment_arousal
from services.vader.emotion import LocalTextAnalyzer, LocalTextProvider
from tests.fakes import CollectingWriter

RATES = (8000, 16000)
TAP_BUDGET_US = 100.0
ANALYZER_BUDGET_MS = 20.0
FRAMES_PER_SEGMENT = round(SEGMENT_S * 1000 / FRAME_MS)
TRANSCRIPT_EVERY_S = 5.0
SLOW_PROVIDER_S = 1.0
KINDS = ("pass-through", "tap, local providers", "tap, slow audio provider")

SENTENCE = "I need to see a doctor about my appointment next week please"
CALM = (140, VoiceShape(pitch=40, range=30, volume=70))  # tests/emotion/test_local_providers.py
AGITATED = (260, VoiceShape(pitch=80, range=90, volume=180))
CALLER_LINES = [
    "I need to see a doctor about my appointment next week please",
    "This is ridiculous, I have been waiting for an hour!",
    "I'm really worried about my test results",
    "Thank you so much, that is a relief",
]
TRANSCRIPTS = [  # typical final transcripts of a scheduling call
    "Hi, I'd like to book a physio appointment for next week",
    "I'm really worried about my test results, can I see the doctor sooner?",
    "Tuesday at ten would be fine",
    "This is ridiculous, I have been waiting for an hour!",
    "Oh great, another hold",
    "Thank you so much, that is a relief",
]


# --- 1. the tap per caller frame ------------------------------------------------------


class PassThrough(FrameProcessor):
    """The baseline: forwards every frame, as any processor on the voice path must."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)


class ArrivalSink(FrameProcessor):
    """Notes when each caller frame arrives after the processor under test."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[int] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            self.arrivals.append(time.perf_counter_ns())
        await self.push_frame(frame, direction)


class CountingAudio:
    """An audio provider wrapper that counts the segments it was asked to analyze."""

    def __init__(self, inner: object, name: str) -> None:
        self.inner = inner
        self.name = name
        self.analyzed = 0

    async def connect(self) -> None:
        await self.inner.connect()

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        self.analyzed += 1
        return await self.inner.analyze(pcm, sample_rate, at=at)

    async def close(self) -> None:
        await self.inner.close()


class SlowAudio:
    """A provider far slower than the segments arrive (a stalled cloud connection)."""

    name = "slow"

    async def connect(self) -> None:
        return None

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        await asyncio.sleep(SLOW_PROVIDER_S)
        return []

    async def close(self) -> None:
        return None


@dataclass
class FrameRun:
    """One processor's timings for one stream of caller frames (nanoseconds)."""

    process_ns: list[int] = field(default_factory=list)
    boundary_ns: list[int] = field(default_factory=list)  # frames that closed a segment
    latency_ns: list[int] = field(default_factory=list)  # queued → arrived at the sink
    segments: int = 0
    analyzed: int = 0
    dropped: int = 0
    wall_s: float = 0.0

    def extend(self, other: FrameRun) -> None:
        self.process_ns += other.process_ns
        self.boundary_ns += other.boundary_ns
        self.latency_ns += other.latency_ns
        self.segments += other.segments
        self.analyzed += other.analyzed
        self.dropped += other.dropped
        self.wall_s += other.wall_s


def phone_session() -> CallSession:
    call_id = str(uuid.uuid4())
    return CallSession(identity=CallIdentity(call_id), mode=SessionMode.PHONE,
                       log=CallLog(call_id, CollectingWriter()), clinic_name="Riverside Clinic")


def make_processor(kind: str) -> tuple[FrameProcessor, CountingAudio | None]:
    if kind == "pass-through":
        return PassThrough(), None
    inner = LocalAudioProvider() if kind == "tap, local providers" else SlowAudio()
    audio = CountingAudio(inner, inner.name)
    tap = EmotionTapProcessor(phone_session(), CallEmotion(), audio=audio, text=LocalTextProvider())
    return tap, audio


def time_audio_frames(processor: FrameProcessor, durations: list[int]) -> None:
    """Wrap the processor's `process_frame` to time each caller frame it handles."""
    inner = processor.process_frame

    async def timed(frame: Frame, direction: FrameDirection) -> None:
        if not isinstance(frame, InputAudioRawFrame):
            await inner(frame, direction)
            return
        started = time.perf_counter_ns()
        await inner(frame, direction)
        durations.append(time.perf_counter_ns() - started)

    processor.process_frame = timed


def caller_frames(speech: bytes, rate: int, count: int) -> list[InputAudioRawFrame]:
    """`count` 20 ms frames of the caller's speech, looped."""
    step = rate * 2 * FRAME_MS // 1000
    chunks = [speech[i: i + step] for i in range(0, len(speech) - step + 1, step)]
    return [InputAudioRawFrame(audio=chunks[i % len(chunks)], sample_rate=rate, num_channels=1)
            for i in range(count)]


async def _at(moment: float) -> None:
    # Behind schedule: still yield, so the pipeline runs between frames as it would.
    await asyncio.sleep(max(0.0, moment - time.perf_counter()))


async def _started(worker: PipelineWorker) -> Callable[[], Awaitable[bool]]:
    ready = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _on_started(_worker, _frame) -> None:
        ready.set()

    return ready.wait


async def run_frames(
    kind: str, speech: bytes, rate: int, count: int, interval_s: float
) -> FrameRun:
    """One processor in a started pipeline, `count` caller frames at `interval_s` apart."""
    processor, audio = make_processor(kind)
    run = FrameRun()
    time_audio_frames(processor, run.process_ns)
    sink = ArrivalSink()
    worker = PipelineWorker(
        Pipeline([processor, sink]),
        params=PipelineParams(audio_in_sample_rate=rate, audio_out_sample_rate=rate),
        enable_rtvi=False, cancel_on_idle_timeout=False,
    )
    wait_started = await _started(worker)
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await asyncio.wait_for(wait_started(), 10)
    frames = caller_frames(speech, rate, count)
    transcript_every = round(TRANSCRIPT_EVERY_S * 1000 / FRAME_MS)
    sent: list[int] = []
    gc.collect()
    started = time.perf_counter()
    for index, frame in enumerate(frames):
        await _at(started + index * interval_s)
        sent.append(time.perf_counter_ns())
        await processor.queue_frame(frame)  # as a transport pushes to its next processor
        if (index + 1) % transcript_every == 0:
            text = TRANSCRIPTS[(index // transcript_every) % len(TRANSCRIPTS)]
            await processor.queue_frame(TranscriptionFrame(text, "caller", ""))
    while len(sink.arrivals) < count:
        await asyncio.sleep(0.005)
    run.wall_s = time.perf_counter() - started
    if isinstance(processor, EmotionTapProcessor):
        await asyncio.sleep(0.05)  # the last segment reaches the provider
        run.dropped = processor.dropped
        run.segments = count // FRAMES_PER_SEGMENT
        run.analyzed = audio.analyzed
    await worker.queue_frame(EndFrame())
    await asyncio.wait_for(running, 15)
    run.boundary_ns = [run.process_ns[i] for i in range(FRAMES_PER_SEGMENT - 1, count,
                                                         FRAMES_PER_SEGMENT)]
    run.latency_ns = [arrived - queued for queued, arrived in zip(sent, sink.arrivals, strict=True)]
    return run


def _us(values: list[int]) -> dict[str, float]:
    micro = [v / 1000 for v in values]
    return {"mean": statistics.fmean(micro), "p50": percentile(micro, 50),
            "p95": percentile(micro, 95), "p99": percentile(micro, 99), "max": max(micro),
            "n": len(micro)}


async def tap_per_frame(speech: dict[int, bytes], reps: int, seconds: float,
                        interval_s: float) -> dict:
    count = round(seconds * 1000 / FRAME_MS)
    report: dict = {"frames": count, "reps": reps, "interval_ms": interval_s * 1000}
    for rate in RATES:
        pooled = {kind: FrameRun() for kind in KINDS}
        rep_means: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for _ in range(reps):
            for kind in KINDS:
                run = await run_frames(kind, speech[rate], rate, count, interval_s)
                pooled[kind].extend(run)
                rep_means[kind].append(statistics.fmean(run.process_ns) / 1000)
        rows = {}
        for kind, run in pooled.items():
            rows[kind] = {
                "process": _us(run.process_ns), "boundary": _us(run.boundary_ns),
                "latency": _us(run.latency_ns), "segments": run.segments,
                "analyzed": run.analyzed, "dropped": run.dropped,
                "rep_means": rep_means[kind], "wall_s": run.wall_s,
            }
        base = rows["pass-through"]
        for kind in KINDS[1:]:
            rows[kind]["added"] = {
                clock: {stat: rows[kind][clock][stat] - base[clock][stat]
                        for stat in ("mean", "p50", "p95", "p99")}
                for clock in ("process", "latency")
            }
        report[rate] = rows
        _print_tap(rate, rows)
    return report


def _print_tap(rate: int, rows: dict) -> None:
    for kind, row in rows.items():
        p, lat = row["process"], row["latency"]
        spread = ", ".join(f"{m:.1f}" for m in row["rep_means"])
        print(f"  {rate} Hz {kind:>25}: process_frame mean {p['mean']:.1f} p50 {p['p50']:.1f} "
              f"p95 {p['p95']:.1f} p99 {p['p99']:.1f} max {p['max']:.0f} µs (rep means {spread}); "
              f"boundary mean {row['boundary']['mean']:.1f} µs; queue→sink p50 {lat['p50']:.0f} "
              f"p95 {lat['p95']:.0f} p99 {lat['p99']:.0f} max {lat['max']:.0f} µs; "
              f"segments {row['segments']} analyzed {row['analyzed']} dropped {row['dropped']}; "
              f"fed in {row['wall_s']:.1f} s")
        if "added" in row:
            added = row["added"]["process"]
            print(f"  {'':>34} added per frame: mean {added['mean']:+.1f} p50 {added['p50']:+.1f} "
                  f"p95 {added['p95']:+.1f} p99 {added['p99']:+.1f} µs")


# --- 2. the local analyzer per 2 s segment ----------------------------------------------


async def two_seconds(rate: int, voice: tuple[int, VoiceShape]) -> bytes:
    wpm, shape = voice
    pcm = await synthesize_pcm(SENTENCE, rate, words_per_minute=wpm, shape=shape)
    return pcm[: int(SEGMENT_S * rate) * 2]


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "max": max(values),
            "n": len(values)}


def time_analyzer(pcm: bytes, rate: int, runs: int, warm_up: int = 20) -> tuple[dict, float | None]:
    for _ in range(warm_up):
        arousal = segment_arousal(pcm, rate)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        segment_arousal(pcm, rate)
        timings.append((time.perf_counter() - started) * 1000)
    return _ms(timings), arousal


async def time_provider(pcm: bytes, rate: int, runs: int, warm_up: int = 20) -> dict:
    """The same through `LocalAudioProvider.analyze`: the hand-off to the analyzer
    process and back, as the tap awaits it."""
    provider = LocalAudioProvider()
    for _ in range(warm_up):
        await provider.analyze(pcm, rate, at=0.0)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        await provider.analyze(pcm, rate, at=0.0)
        timings.append((time.perf_counter() - started) * 1000)
    return _ms(timings)


async def analyzer_per_segment(runs: int) -> list[dict]:
    rows = []
    for rate in RATES:
        cases = {"calm speech": await two_seconds(rate, CALM),
                 "agitated speech": await two_seconds(rate, AGITATED),
                 "silence": b"\x00\x00" * int(SEGMENT_S * rate)}
        for name, pcm in cases.items():
            stats, arousal = time_analyzer(pcm, rate, runs)
            rows.append({"case": name, "rate": rate, "arousal": arousal, **stats})
        agitated = cases["agitated speech"]
        rows.append({"case": "agitated speech, via LocalAudioProvider (worker process)", "rate": rate,
                     "arousal": None, **await time_provider(agitated, rate, runs)})
    for row in rows:
        arousal = ("process hand-off included" if "via" in row["case"] else "no reading"
                   if row["arousal"] is None else f"arousal {row['arousal']:.2f}")
        print(f"  {row['rate']} Hz {row['case']:>48}: p50 {row['p50']:.2f} p95 {row['p95']:.2f} "
              f"max {row['max']:.2f} ms ({arousal})")
    return rows


BUSY_CYCLE_S = 0.002
BUSY_SHARES = (0.5, 1.0)


def _python_slice() -> None:
    """A few microseconds of interpreter work, like a slice of Pipecat's per-frame code."""
    total = 0
    for number in range(100):
        total += number


def _busy_until(stop: Callable[[], bool], busy_share: float) -> float:
    """Behave like a loaded event loop until `stop()`: `busy_share` of each 2 ms running
    Python slices, the rest asleep (a loop waiting on its sockets). Returns the longest
    stall in ms: a slice or a sleep that took longer than it should have."""
    longest, slice_ns = 0, 0
    while not stop():
        cycle_end = time.perf_counter_ns() + int(BUSY_CYCLE_S * busy_share * 1e9)
        while not stop():
            started = time.perf_counter_ns()
            _python_slice()
            elapsed = time.perf_counter_ns() - started
            slice_ns = min(slice_ns or elapsed, elapsed)  # the slice's own cost
            longest = max(longest, elapsed - slice_ns)
            if started + elapsed >= cycle_end:
                break
        if busy_share < 1.0 and not stop():
            nap = BUSY_CYCLE_S * (1 - busy_share)
            started = time.perf_counter_ns()
            time.sleep(nap)
            longest = max(longest, time.perf_counter_ns() - started - int(nap * 1e9))
    return longest / 1e6


def analysis_beside_busy_loop(
    pcm: bytes, rate: int, runs: int, busy_share: float, where: str
) -> dict:
    """The analysis in a worker thread (as `asyncio.to_thread` would run it) or in the
    analyzer's worker process (`ProsodyPool`, as the provider runs it) while this thread
    is a loaded event loop (`_busy_until`). A thread needs the GIL too: its wall time
    grows with the loop's load, and the loop stalls while it holds the GIL.

    Returns the analysis's wall time, the loop's longest stall per analysis, and the
    same stall over as long a stretch with no analysis running (the machine's own), ms.
    """
    pool = ProsodyPool.shared()._pool.start()  # noqa: SLF001 - the provider's own
    took, stalls, baseline = [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        if where == "process":
            future = pool.submit(segment_arousal, pcm, rate)
            stalls.append(_busy_until(future.done, busy_share))
            future.result()
            took.append((time.perf_counter() - started) * 1000)
        else:
            done = threading.Event()
            worker = threading.Thread(target=lambda: (segment_arousal(pcm, rate), done.set()))
            worker.start()
            stalls.append(_busy_until(done.is_set, busy_share))
            worker.join()
            took.append((time.perf_counter() - started) * 1000)
        deadline = time.perf_counter() + took[-1] / 1000
        baseline.append(_busy_until(lambda: time.perf_counter() >= deadline, busy_share))
        time.sleep(0.005)
    return {"analysis": _ms(took), "stall": _ms(stalls), "baseline": _ms(baseline)}


async def analyzer_beside_busy_loop(runs: int) -> list[dict]:
    rows = []
    for rate in RATES:
        pcm = await two_seconds(rate, AGITATED)
        for share, where in itertools.product(BUSY_SHARES, ("thread", "process")):
            row = {"rate": rate, "busy": share, "where": where,
                   **analysis_beside_busy_loop(pcm, rate, runs, share, where)}
            rows.append(row)
            a, s, b = row["analysis"], row["stall"], row["baseline"]
            print(f"  {rate} Hz, loop {share:.0%} busy, in a {where}: analysis p50 {a['p50']:.1f} p95 "
                  f"{a['p95']:.1f} max {a['max']:.1f} ms; longest loop stall per analysis "
                  f"p50 {s['p50']:.2f} p95 {s['p95']:.2f} max {s['max']:.2f} ms (without: "
                  f"p50 {b['p50']:.2f} p95 {b['p95']:.2f} max {b['max']:.2f} ms)")
    return rows


# --- 3. the per-turn work -----------------------------------------------------------------

NOW = 1000.0


def full_window(cloud_style: bool = False) -> EmotionalState:
    """A call 30 s in: 15 prosody segments and a language reading per transcript.

    `cloud_style`: each segment scores every prosody label, as Hume's does, instead of
    the local analyzer's arousal alone.
    """
    state = EmotionalState(clock=lambda: NOW)
    labels = sorted(emotion_table().prosody_labels)
    for index in range(15):
        at = NOW - 28.0 + 2.0 * index
        if cloud_style:
            scores = {label: ((index * 7 + n * 13) % 100) / 100 for n, label in enumerate(labels)}
            state.add(EmotionReading(Source.PROSODY, scores, at, provider="hume"))
        else:
            state.add(EmotionReading(Source.PROSODY, {}, at, provider="local",
                                     valence_measured=False, arousal=0.3 + 0.03 * index))
    analyzer = LocalTextAnalyzer()
    for index, text in enumerate(TRANSCRIPTS):
        for reading in analyzer.analyze(text, at=NOW - 25.0 + 4.0 * index):
            state.add(reading)
    state.note_barge_in()
    return state


def time_us(call: Callable[[], object], runs: int, warm_up: int = 100) -> dict[str, float]:
    for _ in range(warm_up):
        call()
    timings = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        call()
        timings.append((time.perf_counter_ns() - started) / 1000)
    return {"p50": percentile(timings, 50), "p95": percentile(timings, 95), "n": len(timings)}


def per_turn(runs: int) -> list[dict]:
    text = LocalTextAnalyzer()
    transcripts = iter(TRANSCRIPTS * (runs + 200))
    local, cloud = full_window(), full_window(cloud_style=True)
    snapshot = local.snapshot()
    topics = VoiceSettings().sensitive_topics
    picker = FillerPicker()
    work: list[tuple[str, Callable[[], object]]] = [
        ("`LocalTextAnalyzer.analyze`, one transcript (6 typical, in turn)",
         lambda: text.analyze(next(transcripts), at=NOW)),
        ("`EmotionalState.snapshot()`, full 30 s window, local segments",
         local.snapshot),
        ("`EmotionalState.snapshot()`, full 30 s window, Hume-style segments "
         f"({len(emotion_table().prosody_labels)} labels each)", cloud.snapshot),
        ("`session_steering(...)`", lambda: session_steering(snapshot, 150.0)),
        ("`choose_tone(...)`", lambda: choose_tone(
            snapshot, now=NOW, upcoming_text="check_availability Let me look at Tuesday",
            sensitive_topics=topics, previous="calm", workspace_tone="neutral")),
        ("`FillerPicker.decide(...)`", lambda: picker.decide(snapshot, expected_ms=900.0)),
    ]
    rows = [{"work": name, **time_us(call, runs)} for name, call in work]
    window = (f"{snapshot.segments} segments, dominant {snapshot.dominant}, "
              f"steerable {snapshot.steerable}")
    for row in rows:
        print(f"  {row['work']:>80}: p50 {row['p50']:.1f} p95 {row['p95']:.1f} µs")
    print(f"  (local window: {window}; words readings {len(local._words)})")
    return rows


# --- report -----------------------------------------------------------------------------


async def main(reps: int, seconds: float, interval_ms: float, analyzer_runs: int,
               turn_runs: int) -> dict:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    started = time.perf_counter()
    print("(3) per-turn emotion work")
    report: dict = {"per_turn": per_turn(turn_runs)}
    print("(2) local prosody analyzer per 2 s segment")
    report["analyzer"] = await analyzer_per_segment(analyzer_runs)
    print("(2) the same beside a busy event loop (the GIL is shared)")
    report["busy_loop"] = await analyzer_beside_busy_loop(max(20, analyzer_runs // 3))
    speech = {}
    for rate in RATES:
        lines = [await synthesize_pcm(line, rate, words_per_minute=wpm, shape=shape)
                 for line, (wpm, shape) in zip(CALLER_LINES, [CALM, AGITATED, CALM, AGITATED],
                                               strict=True)]
        speech[rate] = b"".join(lines)
    print(f"(1) emotion tap per caller frame: {seconds:g} s of audio × {reps} reps, "
          f"one frame per {interval_ms:g} ms")
    report["tap"] = await tap_per_frame(speech, reps, seconds, interval_ms / 1000)
    report["analyzer_runs"] = analyzer_runs
    report["wall_s"] = time.perf_counter() - started
    print(f"took {report['wall_s']:.0f} s")
    return report


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def render(report: dict) -> str:
    tap = report["tap"]
    speedup = FRAME_MS / tap["interval_ms"]
    lines = [
        "## Emotion layer: the tap per caller frame, the analyzer per segment, per-turn work",
        "",
        measured_line("python -m bench.emotion"),
        "",
        "Budgets: the emotion tap adds < 0.1 ms per audio frame on the voice path; "
        "the local analyzer processes a 2 s segment in < 20 ms.",
        "",
        "### The tap per 20 ms caller frame",
        "",
        f"A started Pipecat pipeline `[processor, sink]` in a `PipelineWorker`, fed as a "
        f"transport feeds its next processor: {tap['frames']} frames ({tap['frames'] // 50} s "
        f"of looped eSpeak NG caller speech) per run, {tap['reps']} runs of each processor, "
        f"alternating, plus a final transcript every {TRANSCRIPT_EVERY_S:g} s of audio. The "
        f"processor is a plain pass-through or `EmotionTapProcessor` with its background workers on "
        f"the offline providers (`LocalAudioProvider`, `LocalTextProvider`) or on an audio "
        f"provider that sleeps {SLOW_PROVIDER_S:g} s per segment. Frames are paced "
        f"{speedup:g}× faster than real time (one per {tap['interval_ms']:g} ms), so a 2 s "
        f"segment closes every {SEGMENT_S * 1000 / speedup:g} ms and the analyzer runs "
        f"{speedup:g}× as often as in a call. `process_frame` is the processor's own time "
        f"per caller frame (its push to the sink's queue included); queue → sink is from "
        f"handing the frame over to its arrival at the next processor, which also sees what "
        f"the workers cost the event loop. µs; added = tap minus pass-through.",
        "",
        "| Rate | Processor | `process_frame` mean / p50 / p95 / p99 | Added mean / p95 / p99 "
        "| Segment-closing frames, mean | Queue → sink p50 / p95 / p99 | Segments analyzed "
        "/ dropped |",
        "|---|---|---|---|---|---|---|",
    ]
    for rate in RATES:
        for kind, row in tap[rate].items():
            p, lat, added = row["process"], row["latency"], row.get("added", {}).get("process")
            added_text = (f"{added['mean']:+.1f} / {added['p95']:+.1f} / {added['p99']:+.1f}"
                          if added else "—")
            segments = (f"{row['analyzed']} of {row['segments']} / {row['dropped']}"
                        if kind != "pass-through" else "—")
            lines.append(
                f"| {rate // 1000} kHz ({rate * 2 * FRAME_MS // 1000} B) | {kind} "
                f"| {p['mean']:.1f} / {p['p50']:.1f} / {p['p95']:.1f} / {p['p99']:.1f} "
                f"| {added_text} | {row['boundary']['mean']:.1f} "
                f"| {lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f} | {segments} |"
            )
    worst = max(tap[rate][kind]["added"]["process"][stat] for rate in RATES
                for kind in KINDS[1:] for stat in ("mean", "p95"))
    lines += [
        "",
        f"Target < {TAP_BUDGET_US:g} µs added per frame: **{_verdict(worst < TAP_BUDGET_US)}** "
        f"(worst added mean or p95: {worst:+.1f} µs, {worst / (FRAME_MS * 10):.2f}% of a "
        f"20 ms frame). {_tap_note(tap)}",
        "",
        "### The local analyzer per 2 s segment",
        "",
        f"`segment_arousal` (what `LocalAudioProvider` runs in the analyzer's worker process) on the "
        f"first 2 s of \"{SENTENCE}\" spoken by eSpeak NG in the calm and agitated voices of "
        f"`tests/emotion/test_local_providers.py`, and on digital silence; "
        f"{report['analyzer_runs']} runs each after 20 warm-up runs, one at a time.",
        "",
        "| Rate | Segment | p50 | p95 | max | Arousal |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["analyzer"]:
        arousal = "—" if row["arousal"] is None else f"{row['arousal']:.2f}"
        if row["case"] == "silence":
            arousal = "no reading"
        lines.append(f"| {row['rate'] // 1000} kHz | {row['case']} | {row['p50']:.2f} ms "
                     f"| {row['p95']:.2f} ms | {row['max']:.2f} ms | {arousal} |")
    analyzed = [r for r in report["analyzer"] if "via" not in r["case"]]
    worst_p95 = max(r["p95"] for r in analyzed)
    lines += [
        "",
        f"Target < {ANALYZER_BUDGET_MS:g} ms per segment: **"
        f"{_verdict(worst_p95 < ANALYZER_BUDGET_MS)}** (worst p95 {worst_p95:.2f} ms). The "
        "analysis runs in one worker process shared by every call (`ProsodyPool`), off the "
        "event loop and outside its GIL: it never delays a caller frame, and costs about "
        f"{_cpu_share(analyzed):.2f}% of one CPU per call at one segment per 2 s. It was "
        "first built in a thread; beside a busy event loop that is what each costs:",
        "",
        *_busy_loop_lines(report["busy_loop"]),
        "",
        "### Per-turn emotion work",
        "",
        "Once per caller turn (steering, the tone chain, fillers) or per final transcript "
        "(the words), never per frame. The window is a call 30 s in: 15 prosody segments "
        f"and the language readings of {len(TRANSCRIPTS)} typical transcripts, one barge-in.",
        "",
        "| Work | p50 | p95 |",
        "|---|---|---|",
    ]
    for row in report["per_turn"]:
        lines.append(f"| {row['work']} | {row['p50']:.1f} µs | {row['p95']:.1f} µs |")
    total = sum(row["p50"] for row in report["per_turn"] if "Hume" not in row["work"])
    lines += [
        "",
        f"One of each is about {total / 1000:.2f} ms per caller turn (p50 sum, local "
        "providers). The words' analysis runs inline on the event loop (`LocalTextProvider`), "
        "the rest in the steering and tone processors on the turn's own frames.",
    ]
    return "\n".join(lines)


def _tap_note(tap: dict) -> str:
    base_means = [m for rate in RATES for m in tap[rate]["pass-through"]["rep_means"]]
    closing = max(
        tap[rate][kind]["boundary"]["mean"] - tap[rate]["pass-through"]["boundary"]["mean"]
        for rate in RATES for kind in KINDS[1:]
    )
    noise = (f"Within this run the pass-through's own mean moved between {min(base_means):.1f} "
             f"and {max(base_means):.1f} µs from one {tap['frames'] // 50} s run to the next, "
             "and on this 2-vCPU machine, shared with other work, the added mean moved between "
             "about +1 and +8 µs from one invocation of the benchmark to the next: the tap costs "
             "a few µs per frame, no more precise than that. The one frame in "
             f"{FRAMES_PER_SEGMENT} that closes a segment (copying 2 s of audio into the bounded "
             f"queue and waking the worker) costs up to {closing:+.1f} µs more than a "
             "pass-through frame. ")
    slow = [tap[rate]["tap, slow audio provider"] for rate in RATES]
    dropped = sum(row["dropped"] for row in slow)
    segments = sum(row["segments"] for row in slow)
    return noise + (
        f"With the provider that sleeps {SLOW_PROVIDER_S:g} s per segment the per-frame cost "
        f"does not grow; over both rates it is handed {sum(r['analyzed'] for r in slow)} of "
        f"{segments} segments and the bounded queue ({MAX_AUDIO_SEGMENTS} segments, oldest out) drops "
        f"{dropped}: the voice path never waits for it."
    )


def _busy_loop_lines(rows: list[dict]) -> list[str]:
    lines = [
        "| Rate | Event loop busy | Analysis in | Analysis wall p50 / p95 | Loop's longest "
        "stall per analysis, p50 / p95 | The same with no analysis running |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        a, s, b = row["analysis"], row["stall"], row["baseline"]
        lines.append(
            f"| {row['rate'] // 1000} kHz | {row['busy']:.0%} | a {row['where']} "
            f"| {a['p50']:.1f} / {a['p95']:.1f} ms "
            f"| {s['p50']:.2f} / {s['p95']:.2f} ms | {b['p50']:.2f} / {b['p95']:.2f} ms |"
        )
    full = [row for row in rows if row["busy"] == 1.0 and row["where"] == "thread"]
    walls = [row["analysis"]["p50"] for row in full]
    return lines + [
        "",
        f"Measured {rows[0]['analysis']['n']} times per "
        "row, while the main thread plays a loaded event loop: Python slices for the given "
        f"share of every {BUSY_CYCLE_S * 1000:g} ms, asleep for the rest (\"stall\": a slice "
        "or a sleep that took longer than it should have). In a thread, with the loop fully "
        f"busy, a segment takes {min(walls):.0f}–{max(walls):.0f} ms (p50) of wall time, not "
        "of CPU: each numpy call in it that releases the GIL then waits for the loop "
        f"thread's switch interval ({sys.getswitchinterval() * 1000:g} ms) to get it back, "
        "and every hand-off stalls the loop (the stall column). With dozens of calls that "
        "is dozens of hand-offs a second, and it cost the service most of its capacity "
        "(\"Per-turn latency our pipeline adds\", above); in the worker process the loop "
        "only submits the segment and reads back a number.",
    ]


def _cpu_share(rows: list[dict]) -> float:
    speech = [r["p50"] for r in rows if r["case"] != "silence"]
    return max(speech) / (SEGMENT_S * 1000) * 100


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="runs of each processor per rate")
    parser.add_argument("--seconds", type=float, default=60.0, help="audio per run")
    parser.add_argument("--frame-interval-ms", type=float, default=1.0,
                        help="time between caller frames (20 is real time)")
    parser.add_argument("--analyzer-runs", type=int, default=300)
    parser.add_argument("--turn-runs", type=int, default=2000)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.reps, args.seconds, args.frame_interval_ms,
                                 args.analyzer_runs, args.turn_runs))
    print(render(result))
    if not args.no_docs:
        write_section("emotion", render(result))
