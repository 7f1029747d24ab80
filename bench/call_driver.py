"""Calls driven through the in-memory phone line: bare Pipecat or ours, fake or offline voices.

Each call speaks the same caller audio (eSpeak speech at 8 kHz, 20 ms frames at
real-time pace) and times two clocks per turn:

- caller-perceived: from the end of the caller's speech to the first agent audio
  written out (includes VAD stop time and the end-of-turn model, identical in both);
- after the turn decision: from the user aggregator pushing the turn's context to
  the first agent audio written out, which is exactly where our processors and
  observers sit, without the turn model's run-to-run noise.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pipecat.audio.turn.base_turn_analyzer import BaseTurnAnalyzer, EndOfTurnState
from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregator,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
    TurnAnalyzerUserTurnStopStrategy,
)
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport, speak
from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from config import Settings
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline, user_aggregator_params
from pipeline.providers import ProviderPlan, build_stt, build_tts
from processors.emotion.call_emotion import CallEmotion
from services.pocketsphinx.stt import DecoderPool
from services.twilio import PHONE_SAMPLE_RATE
from tests.fakes import CollectingWriter, InstantSTT, InstantTTS, ScriptedLLM

CALLER_LINE = "Hi, I would like to book an appointment for next Tuesday morning please."
SILENCE_AFTER_S = 2.5
ROUND_TURNS = 5  # one call at a time: pipelines alternate in rounds of this many turns
LEVEL_TURNS = 3  # turns each call speaks at a capacity level or in a profiling pass
FAKE, LOCAL = "fake", "local"  # the voices: instant fakes, or PocketSphinx + eSpeak NG
# The offline voices get a one-word reply: their cost is listening and speaking, and
# a long reply would still be playing when the caller's next turn starts.
LOCAL_REPLY = "Okay."
# The end-of-turn model sometimes judges a finished sentence unfinished; the turn
# then ends on the silence fallback (TURN_MAX_SILENCE_S = 1.5 s). Such turns are
# decided this long after the voice ends or later, whatever the load (the clue when
# the model's own verdict is out of reach).
FALLBACK_DECISION_S = 1.2

MakeWorker = Callable[[MemoryTransport], PipelineWorker]


@dataclass
class CallResult:
    latencies_ms: list[float] = field(default_factory=list)  # caller-perceived, every turn
    model_closed_ms: list[float] = field(default_factory=list)  # turns the turn model closed
    after_decision_ms: list[float] = field(default_factory=list)
    fallback_turns: int = 0

    def extend(self, other: CallResult) -> None:
        self.latencies_ms += other.latencies_ms
        self.model_closed_ms += other.model_closed_ms
        self.after_decision_ms += other.after_decision_ms
        self.fallback_turns += other.fallback_turns


class TurnClock:
    """When the user aggregator decided each turn (pushed its context), and what the
    end-of-turn model said when the caller's voice stopped.

    It wraps that one processor's `push_frame` and its turn model rather than observing
    the pipeline: an observer is handed every frame hop of every call through its own
    queue, load the benchmark would add to the pipelines it measures.
    """

    def __init__(self, worker: PipelineWorker) -> None:
        self.decisions: list[float] = []
        self.verdicts: list[tuple[float, bool]] | None = None  # (when, the model said complete)
        aggregator = next(p for p in processors_of(worker.pipeline)
                          if isinstance(p, LLMUserAggregator))
        push = aggregator.push_frame

        async def stamped(frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM):
            if isinstance(frame, LLMContextFrame):
                self.decisions.append(time.perf_counter())
            await push(frame, direction)

        aggregator.push_frame = stamped
        model = _turn_model(aggregator)
        if model is not None:
            self.verdicts = []
            analyze = model.analyze_end_of_turn

            async def noted():
                state, prediction = await analyze()
                self.verdicts.append((time.perf_counter(), state == EndOfTurnState.COMPLETE))
                return state, prediction

            model.analyze_end_of_turn = noted

    def model_closed(self, speech_end: float, decided: float | None) -> bool:
        """Whether the end-of-turn model ended the turn, not the silence fallback.

        Its first verdict after the voice stopped says; without the model in reach, a
        decision as late as the fallback's is taken for one.
        """
        if self.verdicts is not None:
            verdict = next((complete for at, complete in self.verdicts if at >= speech_end), None)
            return verdict is not False
        return decided is None or decided - speech_end < FALLBACK_DECISION_S


def _turn_model(aggregator: LLMUserAggregator) -> BaseTurnAnalyzer | None:
    """The end-of-turn model of the aggregator's stop strategy, if it has one."""
    strategies = aggregator._params.user_turn_strategies  # noqa: SLF001 - as the aggregator was given
    for strategy in getattr(strategies, "stop", None) or []:
        if isinstance(strategy, TurnAnalyzerUserTurnStopStrategy):
            return strategy._turn_analyzer  # noqa: SLF001
    return None


def processors_of(processor: FrameProcessor) -> Iterator[FrameProcessor]:
    """`processor` and every processor nested in it."""
    yield processor
    for child in getattr(processor, "processors", []):
        yield from processors_of(child)


def phone_session() -> CallSession:
    """A phone call."""
    call_id = str(uuid.uuid4())
    return CallSession(identity=CallIdentity(call_id), mode=SessionMode.PHONE,
                       log=CallLog(call_id, CollectingWriter()))


def voice_settings(workdir: Path, voices: str) -> Settings:
    if voices == LOCAL:
        return Settings(_env_file=None, data_dir=workdir, stt_provider="local",
                        tts_provider="local")
    return Settings(_env_file=None, data_dir=workdir)


def bare_worker_factory(workdir: Path, voices: str = FAKE) -> MakeWorker:
    """What Pipecat gives you out of the box with the same services and turn detection.

    The offline voices are built by `pipeline.providers`, as ours builds them.
    """
    settings = voice_settings(workdir, voices)
    plan = ProviderPlan.from_settings(settings)

    def make(transport: MemoryTransport) -> PipelineWorker:
        session = phone_session()
        if voices == LOCAL:
            stt = build_stt(plan, settings, session.keyterms)
            llm, tts = ScriptedLLM(lambda _: LOCAL_REPLY), build_tts(plan, settings, session.voice)
        else:
            stt, llm, tts = InstantSTT([CALLER_LINE]), ScriptedLLM(), InstantTTS()
        user, assistant = LLMContextAggregatorPair(
            LLMContext(), user_params=user_aggregator_params(session)
        )
        pipeline = Pipeline([
            transport.input(), stt, user, llm, tts, transport.output(), assistant,
        ])
        return PipelineWorker(
            pipeline,
            params=PipelineParams(
                audio_in_sample_rate=PHONE_SAMPLE_RATE, audio_out_sample_rate=PHONE_SAMPLE_RATE,
                enable_metrics=True,
            ),
            enable_rtvi=False,
        )

    return make


def our_worker_factory(workdir: Path, voices: str = FAKE) -> MakeWorker:
    """`pipeline.factory.build_call_pipeline` with instant fakes, or (LOCAL) the offline voice stack.

    LOCAL is what `make run` serves with no keys: PocketSphinx STT and eSpeak NG TTS,
    with the instant fake LLM in place of the fallback responder's dialogue.
    """
    settings = voice_settings(workdir, voices)
    plan = ProviderPlan.from_settings(settings)

    def overrides() -> ServiceOverrides:
        if voices == LOCAL:
            return ServiceOverrides(llm=ScriptedLLM(lambda _: LOCAL_REPLY), llm_available=True)
        return ServiceOverrides(
            stt=InstantSTT([CALLER_LINE]), llm=ScriptedLLM(), tts=InstantTTS(), llm_available=True
        )

    def make(transport: MemoryTransport) -> PipelineWorker:
        # With the emotion layers, as production runs by default.
        call = build_call_pipeline(transport, phone_session(), CallDeps(
            settings=settings, plan=plan, emotion=CallEmotion(), overrides=overrides(),
            recordings_dir=workdir / "recordings",
        ))
        return call.worker

    return make


def worker_factory(pipeline: str, workdir: Path, voices: str = FAKE) -> MakeWorker:
    """"bare" or "ours"."""
    return (bare_worker_factory if pipeline == "bare" else our_worker_factory)(workdir, voices)


def share_decoders(per_process: int) -> DecoderPool:
    """Size this process's PocketSphinx pool before any call makes it.

    `DecoderPool.shared()` starts one decoder process per CPU in every process that
    uses it; with one bench process per CPU that would be CPUs² decoders contending
    for CPUs, so each bench process of a box gets its share instead.
    """
    pool = DecoderPool("scheduling", size=per_process)
    DecoderPool._shared["scheduling"] = pool  # noqa: SLF001 - the pool every STT service takes
    return pool


def turn_period_s(speech: bytes) -> float:
    """One turn: the caller's sentence, then the silence the agent answers in."""
    return len(speech) / 2 / PHONE_SAMPLE_RATE + SILENCE_AFTER_S


async def run_call(make: MakeWorker, speech: bytes, turns: int, start_delay: float) -> CallResult:
    await asyncio.sleep(start_delay)
    transport = MemoryTransport(PHONE_SAMPLE_RATE)
    worker = make(transport)
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    await runner.add_workers(worker)
    clock = TurnClock(worker)
    running = asyncio.create_task(runner.run())
    await asyncio.sleep(0.5)
    result = CallResult()
    for _ in range(turns):
        speech_end = await speak(transport, speech, PHONE_SAMPLE_RATE, SILENCE_AFTER_S)
        first = transport.output().first_audio_after(speech_end)
        decided = next((t for t in clock.decisions if t >= speech_end), None)
        if first is None:
            continue
        latency_ms = (first - speech_end) * 1000
        result.latencies_ms.append(latency_ms)
        if clock.model_closed(speech_end, decided):
            result.model_closed_ms.append(latency_ms)
        else:
            result.fallback_turns += 1
        if decided is not None and decided <= first:
            result.after_decision_ms.append((first - decided) * 1000)
    await worker.cancel()
    await asyncio.wait_for(running, 10)
    return result


async def first_calls(makes: list[MakeWorker], speech: bytes) -> None:
    """One one-turn call through each pipeline, unmeasured: a fresh process's first call
    pays for lazy imports, the first synthesis and decode, what no later call pays."""
    for make in makes:
        await run_call(make, speech, 1, 0.0)


@dataclass
class LevelRun:
    """What one level of concurrent calls measured in one process."""

    result: CallResult
    rss_growth_kib: int  # peak resident memory over the level's baseline
    wall_s: float
    cpu_s: float  # this process's CPU and its worker processes' (decoders, analyzer)


async def run_level(make: MakeWorker, speech: bytes, calls: int, turns: int) -> LevelRun:
    """`calls` calls at once, their starts spread over one turn so they are not in lockstep."""
    gc.collect()
    started, cpu_before = time.perf_counter(), cpu_s()
    before = rss_kib()
    peak = before

    async def sample_rss() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_kib())
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample_rss())
    spread = turn_period_s(speech) if calls > 1 else 0.0
    results = await asyncio.gather(*[
        run_call(make, speech, turns, random.uniform(0, spread)) for _ in range(calls)
    ])
    sampler.cancel()
    merged = CallResult()
    for result in results:
        merged.extend(result)
    return LevelRun(merged, peak - before, time.perf_counter() - started, cpu_s() - cpu_before)


def cpu_s() -> float:
    """CPU seconds this process and its live worker processes have used so far."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue  # ended meanwhile
    return total


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
