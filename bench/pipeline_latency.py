"""(a) Per-turn latency our pipeline adds over a bare Pipecat pipeline, and (b) calls per process.

Both pipelines get the same caller audio (eSpeak speech at 8 kHz, 20 ms frames at
real-time pace) through the same in-memory phone transport, with the same instant
fake STT/LLM/TTS and the same real Silero VAD + smart-turn v3. A turn's latency is
from the end of the caller's speech to the first agent audio written out, so the
difference between the two pipelines is what our processors and observers cost.

    python -m bench.pipeline_latency [--turns 15] [--levels 1,10,25,50,75]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport, percentile, speak
from bot import PHONE_SAMPLE_RATE, ServiceOverrides, build_call_pipeline, user_aggregator_params
from config import Settings
from services.call_session import CallLog, CallSession, SessionMode
from services.espeak import synthesize_pcm
from services.providers import ProviderPlan
from tests.fakes import CollectingWriter, InstantSTT, InstantTTS, ScriptedLLM

CALLER_LINE = "Hi, I would like to book an appointment for next Tuesday morning please."
SILENCE_AFTER_S = 2.5


@dataclass
class CallResult:
    latencies_ms: list[float]


def phone_session() -> CallSession:
    call_id = str(uuid.uuid4())
    return CallSession(call_id=call_id, mode=SessionMode.PHONE, log=CallLog(call_id, CollectingWriter()))


def bare_worker(transport: MemoryTransport) -> PipelineWorker:
    """What Pipecat gives you out of the box with the same services and turn detection."""
    user, assistant = LLMContextAggregatorPair(
        LLMContext(), user_params=user_aggregator_params(phone_session())
    )
    pipeline = Pipeline([
        transport.input(), InstantSTT([CALLER_LINE]), user, ScriptedLLM(), InstantTTS(),
        transport.output(), assistant,
    ])
    return PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=PHONE_SAMPLE_RATE, audio_out_sample_rate=PHONE_SAMPLE_RATE,
            enable_metrics=True,
        ),
        enable_rtvi=False,
    )


def our_worker_factory(workdir: Path):
    settings = Settings(_env_file=None, data_dir=workdir)
    plan = ProviderPlan.from_settings(settings)

    def make(transport: MemoryTransport) -> PipelineWorker:
        call = build_call_pipeline(
            transport, phone_session(), settings=settings, plan=plan,
            overrides=ServiceOverrides(
                stt=InstantSTT([CALLER_LINE]), llm=ScriptedLLM(), tts=InstantTTS(),
                llm_available=True,
            ),
            recordings_dir=workdir / "recordings",
        )
        return call.worker

    return make


async def run_call(make, speech: bytes, turns: int, start_delay: float) -> CallResult:
    await asyncio.sleep(start_delay)
    transport = MemoryTransport(PHONE_SAMPLE_RATE)
    worker = make(transport)
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await asyncio.sleep(0.5)
    latencies = []
    for _ in range(turns):
        speech_end = await speak(transport, speech, PHONE_SAMPLE_RATE, SILENCE_AFTER_S)
        first = transport.output().first_audio_after(speech_end)
        if first is not None:
            latencies.append((first - speech_end) * 1000)
    await worker.cancel()
    await asyncio.wait_for(running, 10)
    return CallResult(latencies)


async def run_level(make, speech: bytes, calls: int, turns: int) -> tuple[list[float], int]:
    gc.collect()
    before = rss_kib()
    peak = before

    async def sample_rss() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_kib())
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample_rss())
    results = await asyncio.gather(*[
        run_call(make, speech, turns, random.uniform(0, 1.5)) for _ in range(calls)
    ])
    sampler.cancel()
    latencies = [value for result in results for value in result.latencies_ms]
    missing = calls * turns - len(latencies)
    if missing:
        print(f"  warning: {missing} turns got no answer")
    return latencies, (peak - before) // max(calls, 1)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def main(turns: int, levels: list[int]) -> dict:
    speech = await synthesize_pcm(CALLER_LINE, PHONE_SAMPLE_RATE)
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    ours = our_worker_factory(workdir)
    report: dict = {}

    print(f"(a) one call, {turns} turns each: bare Pipecat vs ours")
    bare_lat, _ = await run_level(bare_worker, speech, 1, turns)
    our_lat, _ = await run_level(ours, speech, 1, turns)
    report["added"] = {
        "bare_p50": percentile(bare_lat, 50), "bare_p95": percentile(bare_lat, 95),
        "ours_p50": percentile(our_lat, 50), "ours_p95": percentile(our_lat, 95),
        "turns": turns,
    }
    added = report["added"]
    added["added_p50"] = added["ours_p50"] - added["bare_p50"]
    added["added_p95"] = added["ours_p95"] - added["bare_p95"]
    added["ratio_p95"] = added["ours_p95"] / added["bare_p95"]
    print(f"  bare p50 {added['bare_p50']:.1f} ms p95 {added['bare_p95']:.1f} ms; "
          f"ours p50 {added['ours_p50']:.1f} ms p95 {added['ours_p95']:.1f} ms; "
          f"added p95 {added['added_p95']:+.1f} ms (ratio {added['ratio_p95']:.3f})")

    print("(b) concurrent calls at real-time pacing (3 turns each)")
    report["levels"] = []
    baseline_p95 = None
    for calls in levels:
        started = time.perf_counter()
        latencies, rss_per_call = await run_level(ours, speech, calls, 3)
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        baseline_p95 = baseline_p95 or p95
        row = {"calls": calls, "p50": p50, "p95": p95, "rss_per_call_kib": rss_per_call,
               "answered": len(latencies), "expected": calls * 3,
               "wall_s": time.perf_counter() - started}
        report["levels"].append(row)
        print(f"  {calls:4d} calls: p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  "
              f"({p95 / baseline_p95:.2f}x)  RSS/call {rss_per_call / 1024:.1f} MiB  "
              f"answered {row['answered']}/{row['expected']}")
    return report


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--levels", default="1,10,25,50,75")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    asyncio.run(main(args.turns, [int(n) for n in args.levels.split(",")]))
