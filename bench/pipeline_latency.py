"""Latency our pipeline adds over bare Pipecat, calls per process and per box, and where the CPU goes.

Both pipelines get the same caller audio through the same in-memory phone line
(`call_driver.py`), with the same instant fake STT/LLM/TTS or the same offline voices,
and the same real Silero VAD + smart-turn v3. One run measures, in order:

(a) the latency per turn ours adds: one call at a time, bare and ours alternating;
(b) calls per process: bare and ours at the same levels, interleaved, until each fails
    twice in a row, and ours ÷ bare sustained calls;
(c) calls per box: a level's calls split across one bench process per CPU (`box.py`),
    as the service runs one worker process per CPU, on the fakes and the offline voices;
(d) where the CPU goes, per processor, in passes of their own (`cpu_profile.py`).

    python -m bench.pipeline_latency [--turns 20] [--levels 10,20,25,30,40,50,60]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from bench.box import Box, BoxSpec, decoders_per_process, pool_processes, warm_up
from bench.call_driver import (
    CALLER_LINE,
    FAKE,
    LEVEL_TURNS,
    LOCAL,
    ROUND_TURNS,
    CallResult,
    LevelRun,
    MakeWorker,
    first_calls,
    run_level,
    turn_period_s,
    worker_factory,
)
from bench.capacity import LevelRow, climb, level_row
from bench.cpu_profile import Profiler, ProfileRow, instrumented, profile_rows
from bench.harness import percentile, trim_trailing_silence
from bench.pipeline_latency_report import Run, render
from bench.report import write_section
from lib import event_loop
from services.espeak.engine import synthesize_pcm
from services.pocketsphinx.stt import DecoderPool
from services.turn_models import silero_batcher
from services.twilio import PHONE_SAMPLE_RATE

PIPELINES = ("bare", "ours")
SILERO = "Silero VAD (every call's windows scored in one batch, a loop callback)"


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "n": len(values)}


async def one_call_rounds(makes: dict[str, MakeWorker], speech: bytes,
                          turns: int) -> dict[str, CallResult]:
    """One call at a time, each pipeline in turn for ROUND_TURNS turns, so machine load
    drifts affect them alike."""
    results = {name: CallResult() for name in makes}
    for _ in range(max(1, turns // ROUND_TURNS)):
        for name, make in makes.items():
            results[name].extend((await run_level(make, speech, 1, ROUND_TURNS)).result)
    return results


def added_latency(bare: CallResult, ours: CallResult) -> dict:
    report = {
        "turns": len(ours.latencies_ms),
        "perceived": {"bare": _stats(bare.model_closed_ms), "ours": _stats(ours.model_closed_ms)},
        "fallback_turns": {"bare": bare.fallback_turns, "ours": ours.fallback_turns},
        "after_decision": {
            "bare": _stats(bare.after_decision_ms), "ours": _stats(ours.after_decision_ms),
        },
    }
    for clock in ("perceived", "after_decision"):
        row = report[clock]
        row["added_p50"] = row["ours"]["p50"] - row["bare"]["p50"]
        row["added_p95"] = row["ours"]["p95"] - row["bare"]["p95"]
        row["ratio_p95"] = row["ours"]["p95"] / row["bare"]["p95"]
        print(f"  {clock:>15}: bare p50 {row['bare']['p50']:.1f} / p95 {row['bare']['p95']:.1f} ms; "
              f"ours p50 {row['ours']['p50']:.1f} / p95 {row['ours']['p95']:.1f} ms; "
              f"added p95 {row['added_p95']:+.1f} ms (ratio {row['ratio_p95']:.3f})")
    return report


def row_of(run: LevelRun, calls: int, speech: bytes, one_call_p95_ms: float,
           label: str) -> LevelRow:
    result = run.result
    row = level_row(
        calls, LEVEL_TURNS, model_closed_ms=result.model_closed_ms,
        after_decision_ms=result.after_decision_ms, answered=len(result.latencies_ms),
        fallback_turns=result.fallback_turns, rss_growth_kib=run.rss_growth_kib,
        wall_s=run.wall_s, one_call_p95_ms=one_call_p95_ms, cpu_s=run.cpu_s,
        audio_s=calls * LEVEL_TURNS * turn_period_s(speech), load=os.getloadavg()[0],
    )
    print(f"  {label:>5} {calls:4d} calls: p50 {row.p50_ms:7.1f} ms  p95 {row.p95_ms:7.1f} ms "
          f"({row.p95_vs_one_call:.2f}x)  decided→audio p95 {row.after_decision_p95_ms:6.1f} ms  "
          f"answered {row.answered}/{row.expected}  fallback {row.fallback_turns}  "
          f"CPU {row.cpu_ms_per_audio_s:.0f} ms/s  "
          f"{'held' if row.held else 'FAILED'}  ({row.wall_s:.0f} s, load {row.load:.1f})",
          flush=True)
    return row


async def per_process(makes: dict[str, MakeWorker], speech: bytes, levels: list[int],
                      one_call_p95: dict[str, float]) -> dict[str, list[LevelRow]]:
    async def measure(name: str, calls: int) -> LevelRow:
        run = await run_level(makes[name], speech, calls, LEVEL_TURNS)
        return row_of(run, calls, speech, one_call_p95[name], name)

    return await climb(levels, PIPELINES, measure)


async def per_box(spec: BoxSpec, workdir: Path, speech: bytes, levels: list[int],
                  one_call_p95_ms: float) -> list[LevelRow]:
    box = Box(spec, workdir, speech)
    await asyncio.to_thread(box.__enter__)
    try:
        async def measure(_: str, calls: int) -> LevelRow:
            run = await asyncio.to_thread(box.run_level, calls, LEVEL_TURNS)
            return row_of(run, calls, speech, one_call_p95_ms, "box")

        return (await climb(levels, ["ours"], measure))["ours"]
    finally:
        await asyncio.to_thread(box.__exit__, None, None, None)


async def profile(makes: dict[str, MakeWorker], speech: bytes,
                  calls: int) -> tuple[dict[str, list[ProfileRow]], dict[str, float]]:
    """Each pipeline's calls in a pass of their own with every hook in (`cpu_profile.py`):
    the accounts, and the hooks' own cost taken out of them (ms per second of call audio)."""
    profiles, hooks = {}, {}
    audio_s = calls * LEVEL_TURNS * turn_period_s(speech)
    for name in ("ours", "bare"):
        async with Profiler(pool_processes, callbacks=[(silero_batcher(), "_flush", SILERO)]) as profiler:
            await run_level(instrumented(makes[name], profiler.ledger), speech, calls, LEVEL_TURNS)
        profiles[name] = profile_rows(profiler.accounts, audio_s)
        hooks[name] = profiler.hooks_ns / 1e6 / audio_s
        total = sum(row.ms_per_audio_s for row in profiles[name])
        print(f"  {name}: {total:.1f} ms CPU per second of call audio (hooks {hooks[name]:.1f} "
              "taken out); costliest: "
              + ", ".join(f"{row.account} {row.ms_per_audio_s:.1f}" for row in profiles[name][:4]))
    return profiles, hooks


@dataclass(frozen=True)
class Plan:
    turns: int
    levels: list[int]
    box_levels: list[int]
    local_box_levels: list[int]
    profile_calls: int
    local_profile_calls: int


async def main(plan: Plan) -> Run:
    started = time.perf_counter()
    logger.remove()
    logger.add(sys.stderr, level="INFO")  # what `make run` logs
    load = [("start", os.getloadavg())]
    speech = trim_trailing_silence(
        await synthesize_pcm(CALLER_LINE, PHONE_SAMPLE_RATE), PHONE_SAMPLE_RATE
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    await warm_up(FAKE)
    makes = {name: worker_factory(name, workdir) for name in PIPELINES}
    await first_calls(list(makes.values()), speech)
    print(f"(a) one call at a time, {plan.turns} turns each: bare Pipecat vs ours", flush=True)
    one_call = await one_call_rounds(makes, speech, plan.turns)
    added = added_latency(one_call["bare"], one_call["ours"])
    print(f"(b) bare and ours at the same levels, {LEVEL_TURNS} turns a call", flush=True)
    one_call_p95 = {name: added["perceived"][name]["p95"] for name in PIPELINES}
    processes = os.cpu_count() or 2
    run = Run(turns=plan.turns, added=added, processes=processes,
              decoders_per_process=decoders_per_process(processes),
              per_process=await per_process(makes, speech, plan.levels, one_call_p95))
    if plan.profile_calls:
        print(f"(d) CPU profile, {plan.profile_calls} calls, fake voices", flush=True)
        run.profile_calls[FAKE] = plan.profile_calls
        run.profiles[FAKE], run.hooks_cpu[FAKE] = await profile(makes, speech, plan.profile_calls)
        run.unhooked_cpu = {name: row.cpu_ms_per_audio_s for name, rows in run.per_process.items()
                            for row in rows if row.calls == plan.profile_calls}
    if plan.local_box_levels or plan.local_profile_calls:
        await offline_alone(run, plan, workdir, speech)
    if plan.box_levels:
        print(f"(c) per box: {processes} processes, fake voices", flush=True)
        run.box = await per_box(BoxSpec("ours", FAKE, 0), workdir, speech, plan.box_levels,
                                one_call_p95["ours"])
    if plan.local_box_levels:
        print(f"(c) per box: {processes} processes, offline voices, "
              f"{run.decoders_per_process} decoder(s) each", flush=True)
        run.local_box = await per_box(
            BoxSpec("ours", LOCAL, run.decoders_per_process), workdir, speech,
            plan.local_box_levels, run.local_one_call_p95_ms)
    load.append(("end", os.getloadavg()))
    run.load, run.minutes = load, (time.perf_counter() - started) / 60
    return run


async def offline_alone(run: Run, plan: Plan, workdir: Path, speech: bytes) -> None:
    """The offline voices in this process alone on the box (one decoder per CPU, as one
    service process has): one call's p95, the box series' baseline, and the CPU profile."""
    await DecoderPool.shared().warm_up()
    local = {name: worker_factory(name, workdir, LOCAL) for name in PIPELINES}
    await first_calls(list(local.values()), speech)
    print("(c) one call alone, offline voices", flush=True)
    alone = await one_call_rounds({"ours": local["ours"]}, speech, ROUND_TURNS)
    run.local_one_call_p95_ms = percentile(alone["ours"].model_closed_ms, 95)
    print(f"  one call p95 {run.local_one_call_p95_ms:.0f} ms", flush=True)
    if plan.local_profile_calls:
        print(f"(d) CPU profile, {plan.local_profile_calls} calls, offline voices", flush=True)
        run.profile_calls[LOCAL] = plan.local_profile_calls
        run.profiles[LOCAL], run.hooks_cpu[LOCAL] = await profile(
            local, speech, plan.local_profile_calls)
    DecoderPool.shared().shutdown()  # the box processes start their own


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="(a): turns per pipeline")
    parser.add_argument("--levels", default="10,15,20,25,30,40,50",
                        help="(b): calls per process")
    parser.add_argument("--box-levels", default="20,30,40,50,60", help="(c): calls per box, fakes")
    parser.add_argument("--local-box-levels", default="5,10,15,20,25",
                        help="(c): calls per box, offline voices ('' to skip)")
    parser.add_argument("--profile-calls", type=int, default=10,
                        help="(d), fakes; best one of --levels (0 to skip)")
    parser.add_argument("--local-profile-calls", type=int, default=5,
                        help="(d), offline voices (0 to skip)")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser.parse_args()


def _levels(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n.strip()]


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(Plan(
        turns=args.turns, levels=_levels(args.levels), box_levels=_levels(args.box_levels),
        local_box_levels=_levels(args.local_box_levels), profile_calls=args.profile_calls,
        local_profile_calls=args.local_profile_calls,
    )))
    section = render(result)
    print(section)
    if not args.no_docs:
        write_section("pipeline-latency", section)
