"""(2) What outbound load costs inbound calls in the same process.

The service runs in this process (`api/app.create_app` under uvicorn: the runtime, its
job worker with every job kind, the Twilio webhooks), and so do K inbound calls:
`bench.pipeline_latency`'s calls (our pipeline, the same caller audio at real-time pace
through the in-memory phone line, instant fake STT/LLM/TTS, the real VAD and end-of-turn
model), each holding one of the runtime's lines while it runs, as a call does. Each round
runs the calls three times: quiet (no outbound task due); paced (a backlog falls due as
the calls start, and the dispatcher dials it at its default pace, `OUTBOUND_DIALS_PER_SECOND`);
unpaced (the same backlog with the pace lifted, so the dispatcher dials and takes status
callbacks at the rate it can for the whole round). After an outbound round the tasks not
dialled yet are cancelled and the process settles before the next.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Self

import uvicorn
from loguru import logger

from api.app import create_app
from bench.call_driver import (
    SILENCE_AFTER_S,
    CallResult,
    our_worker_factory,
    run_call,
)
from bench.outbound_dispatch import most_open
from bench.outbound_setup import (
    Clinic,
    Standin,
    callees,
    cancel_open,
    due_in,
    due_tasks,
    first_attempts,
)
from bench.report import percentile
from config import Settings
from db import jobs
from db.outbound import DIAL_JOB, dial_key
from main import configure_logging, server_config
from pipeline.providers import CLOUD_VOICES_CALL_CAPACITY
from runner.outbound.pace import DialPace
from runner.runtime import AppRuntime
from services.twilio import PHONE_SAMPLE_RATE
from tests.e2e.service_process import free_port

QUIET, PACED, UNPACED = "quiet", "paced", "unpaced"
# The pace lifted: the dispatcher dials as fast as it can.
UNPACED_RATE = 1000.0
# The inbound calls run on instant fake voices (as `bench.pipeline_latency` measures them),
# so the process has the cloud voices' capacity.
CAPACITY = CLOUD_VOICES_CALL_CAPACITY
TURNS = 3
LAG_EVERY_S = 0.05  # how often the event loop's lateness is sampled
SETTLE_TIMEOUT_S = 60.0
WARM_UP_S = 5.0


@dataclass
class Condition:
    calls: CallResult = field(default_factory=CallResult)
    loop_lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    dials: int = 0
    window_s: float = 0.0
    left_undialled: int = 0
    busy_seconds: int = 0  # seconds of the rounds in which a call was dialled
    most_open: int = 0
    tasks: int = 0
    callbacks: int = 0
    callbacks_refused: int = 0
    calls_dialled: list[dict[str, Any]] = field(default_factory=list)


async def start_service(settings: Settings) -> tuple[uvicorn.Server, asyncio.Task, AppRuntime]:
    """The service in this process, as `python main.py serve` runs it."""
    app = create_app(settings)
    server = uvicorn.Server(server_config(settings, app))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # raises why it stopped
            raise RuntimeError("the in-process service stopped at start-up")
        await asyncio.sleep(0.05)
    return server, serving, app.state.runtime


class LoopLag:
    """How late the event loop wakes a sleeper: every other coroutine waits as long."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(LAG_EVERY_S)
            self.samples.append((time.perf_counter() - asked - LAG_EVERY_S) * 1000)

    def __enter__(self) -> Self:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def inbound_calls(runtime: AppRuntime, make, speech: bytes, calls: int,
                        turns: int = TURNS) -> CallResult:
    """`calls` calls of `turns` turns, their starts spread over one turn, each holding one
    of the runtime's lines (`active_calls`) while it runs."""
    turn_period = len(speech) / 2 / PHONE_SAMPLE_RATE + SILENCE_AFTER_S

    async def one() -> CallResult:
        key = f"bench-{uuid.uuid4()}"
        runtime.active_calls[key] = asyncio.current_task()  # type: ignore[assignment]
        try:
            return await run_call(make, speech, turns, random.uniform(0, turn_period))
        finally:
            runtime.active_calls.pop(key, None)

    merged = CallResult()
    for result in await asyncio.gather(*[one() for _ in range(calls)]):
        merged.extend(result)
    return merged


async def measured_round(runtime: AppRuntime, make, speech: bytes, calls: int,
                         into: Condition) -> tuple[float, float]:
    """The inbound calls, measured into `into`; the round's start and end (epoch s)."""
    cpu, started, window_start = time.process_time(), time.perf_counter(), time.time()
    with LoopLag() as lag:
        into.calls.extend(await inbound_calls(runtime, make, speech, calls))
    into.loop_lag_ms += lag.samples
    into.cpu_s += time.process_time() - cpu
    into.wall_s += time.perf_counter() - started
    return window_start, time.time()


async def outbound_round(runtime: AppRuntime, standin: Standin, clinic: Clinic, make,
                         speech: bytes, calls: int, backlog: int, dials_per_second: float,
                         into: Condition) -> None:
    """The same calls while a backlog of `backlog` outbound tasks falls due as they start,
    dialled at most `dials_per_second` (the process's dial pace, fresh for the round)."""
    pool = runtime.db.pool
    runtime.dial_pace = DialPace(dials_per_second)
    dues = [0.0] * backlog
    numbers = callees(len(dues))
    await standin.add_callees(numbers)
    start = due_in(2.0 + len(dues) * 0.01)  # every task written before the first is due
    task_ids = await due_tasks(pool, clinic, list(numbers),
                               [start + timedelta(seconds=after) for after in dues])
    await asyncio.sleep(max(0.0, start.timestamp() - time.time()))
    window_start, window_end = await measured_round(runtime, make, speech, calls, into)
    dialled = {a["task_id"] for a in await first_attempts(pool, task_ids)}
    due_by_end = sum(1 for after in dues if start.timestamp() + after <= window_end)
    into.left_undialled += max(0, due_by_end - len(dialled))
    into.tasks += due_by_end
    await settle(pool, task_ids)
    placed = await standin.calls(set(numbers))
    in_window = [c for c in placed if window_start <= c["placed_at"] <= window_end]
    into.dials += len(in_window)
    into.window_s += window_end - window_start
    into.busy_seconds += len({int(c["placed_at"] - window_start) for c in in_window})
    into.most_open = max(into.most_open, most_open(placed))
    into.callbacks += sum(c["callbacks"] for c in in_window)
    into.callbacks_refused += sum(c["callbacks_refused"] for c in in_window)


async def settle(pool, task_ids: list[str]) -> None:
    """Cancel what was not dialled, its jobs too, and wait for the dials under way to end,
    so the next round starts quiet."""
    await cancel_open(pool, task_ids)
    queued = [row["id"] for row in await pool.fetch(
        "SELECT id FROM pgqueuer WHERE entrypoint = $1 AND dedupe_key = ANY($2::text[]) "
        "AND status = 'queued'", DIAL_JOB, [dial_key(task_id) for task_id in task_ids])]
    await jobs.cancel(pool, queued)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        open_attempts = await pool.fetchval(
            "SELECT count(*) FROM outbound_attempts WHERE task_id = ANY($1::uuid[]) "
            "AND status <> 'ended'", [uuid.UUID(task_id) for task_id in task_ids])
        running = await pool.fetchval(
            "SELECT count(*) FROM pgqueuer WHERE entrypoint = $1 AND status = 'picked'",
            DIAL_JOB)
        if open_attempts == 0 and running == 0:
            return
        await asyncio.sleep(0.2)
    logger.warning(f"the dials of an outbound round had not settled in {SETTLE_TIMEOUT_S:.0f} s")


async def measure_inbound_cost(dsn: str, standin: Standin, clinic: Clinic, workdir: Path, *,
                               calls: int, rounds: int, backlog: int,
                               speech: bytes, say: Callable[[str], None]) -> dict[str, Any]:
    port = free_port()
    settings = Settings(
        _env_file=None, data_dir=workdir / "in-process", database_url=dsn, host="127.0.0.1",
        port=port, public_url=f"http://127.0.0.1:{port}", log_level="INFO",
        twilio_account_sid=standin.account_sid, twilio_auth_token=standin.auth_token,
        twilio_api_base_url=standin.base_url, max_concurrent_calls=CAPACITY)
    configure_logging(settings)
    server, serving, runtime = await start_service(settings)
    make = our_worker_factory(workdir / "calls")
    conditions = {QUIET: Condition(), PACED: Condition(), UNPACED: Condition()}
    pace = settings.outbound.dials_per_second
    try:
        # The start-up's background work (the world index, the offline voices' processes)
        # and every call's first use of the models: before anything is measured.
        await asyncio.sleep(WARM_UP_S)
        say(f"  warm-up: {calls} inbound calls, one turn each")
        await inbound_calls(runtime, make, speech, calls, turns=1)
        for number in range(rounds):
            say(f"  round {number + 1}/{rounds}: {calls} inbound calls, quiet")
            await measured_round(runtime, make, speech, calls, conditions[QUIET])
            say(f"  round {number + 1}/{rounds}: {calls} inbound calls, {backlog} outbound "
                f"tasks due at once, dialled {pace:g} a second")
            await outbound_round(runtime, standin, clinic, make, speech, calls, backlog,
                                 pace, conditions[PACED])
            say(f"  round {number + 1}/{rounds}: {calls} inbound calls, {backlog} outbound "
                "tasks due at once, unpaced")
            await outbound_round(runtime, standin, clinic, make, speech, calls, backlog,
                                 UNPACED_RATE, conditions[UNPACED])
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 60)
    return {"calls": calls, "rounds": rounds, "backlog": backlog, "pace": pace,
            "capacity": CAPACITY, "reserve": settings.outbound.inbound_reserve,
            "recheck_s": settings.outbound.capacity_recheck_s,
            **{name: summarize(condition) for name, condition in conditions.items()}}


def summarize(condition: Condition) -> dict[str, Any]:
    calls = condition.calls
    return {
        "after_decision": _stats(calls.after_decision_ms),
        "perceived": _stats(calls.model_closed_ms),
        "fallback_turns": calls.fallback_turns, "turns": len(calls.latencies_ms),
        "loop_lag": _stats(condition.loop_lag_ms),
        "cpu_share": condition.cpu_s / condition.wall_s if condition.wall_s else float("nan"),
        "dials": condition.dials, "window_s": condition.window_s,
        "dials_per_s": condition.dials / condition.window_s if condition.window_s else 0.0,
        "left_undialled": condition.left_undialled, "tasks": condition.tasks,
        "busy_share": (min(1.0, condition.busy_seconds / condition.window_s)
                       if condition.window_s else 0.0),
        "most_open": condition.most_open,
        "callbacks": condition.callbacks, "callbacks_refused": condition.callbacks_refused,
    }


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95),
            "max": max(values) if values else float("nan"), "n": len(values)}
