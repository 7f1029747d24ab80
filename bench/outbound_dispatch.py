"""(1) Dispatcher throughput: the real service process(es) dial a burst of due tasks
through the Twilio stand-in, and every attempt is followed to its outcome.

N callback tasks fall due at one moment, each to its own number answered fast (busy, no
answer, voicemail in turn: no media stream). One or two `python main.py serve` processes
share the database; their job workers run the `outbound_dial` jobs, the stand-in (its
own process) posts every status callback and asks the voicemail's TwiML. Clocks: when the
stand-in saw each create request, the attempts' `started_at` / `ended_at` in the database.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.outbound_setup import (
    Clinic,
    Standin,
    callees,
    cancel_open,
    due_in,
    due_tasks,
    wait_for_outcomes,
)
from bench.report import percentile
from tests.e2e.service_process import ServiceProcess, free_port, start_service

WARM_UP_S = 3.0  # the job workers connect and listen after the service is healthy
SERVICE_START_S = 180.0
RECHECK_S = 45.0  # OUTBOUND_CAPACITY_RECHECK_S's default
# After the last dial, how long outcomes are waited for: a status callback the service
# refused leaves its attempt to the dispatcher's follow-up, 120 s after the dial.
OUTCOME_GRACE_S = 20.0


def _start(dsn: str, standin: Standin, workdir: Path, index: int,
           env: dict[str, str]) -> ServiceProcess:
    port = free_port()
    data_dir = workdir / f"service-{index}"
    data_dir.mkdir(parents=True, exist_ok=True)
    return start_service({
        "DATABASE_URL": dsn, "DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO",
        "PUBLIC_URL": f"http://127.0.0.1:{port}", **standin.service_env(), **env,
    }, data_dir / "service.log", timeout_s=SERVICE_START_S, port=port)


async def measure_dispatch(pool, dsn: str, standin: Standin, clinic: Clinic, workdir: Path, *,
                           processes: int, tasks: int,
                           env: dict[str, str] | None = None,
                           timeout_s: float = 180.0) -> dict[str, Any]:
    numbers = callees(tasks)
    await standin.add_callees(numbers)
    run_dir = workdir / f"dispatch-{uuid.uuid4().hex[:6]}"
    services = await asyncio.gather(*[
        asyncio.to_thread(_start, dsn, standin, run_dir, index, env or {})
        for index in range(processes)])
    task_ids: list[str] = []
    try:
        await asyncio.sleep(WARM_UP_S)
        lead_s = 2.0 + tasks * 0.01  # every task written before the moment they fall due
        due = due_in(lead_s)
        task_ids = await due_tasks(pool, clinic, list(numbers), due)
        written_before_due = time.time() < due.timestamp()
        attempts = await wait_for_outcomes(pool, task_ids, dial_timeout_s=timeout_s,
                                           grace_s=OUTCOME_GRACE_S)
        calls = await standin.calls(set(numbers))
    finally:
        await asyncio.gather(*[asyncio.to_thread(service.stop) for service in services])
        if task_ids:
            await cancel_open(pool, task_ids)
    logs = [service.log() for service in services]
    return summarize(due.timestamp(), numbers, attempts, calls, processes=processes,
                     written_before_due=written_before_due, logs=logs)


def summarize(due: float, numbers: dict[str, str], attempts: list[dict[str, Any]],
              calls: list[dict[str, Any]], *, processes: int, written_before_due: bool,
              logs: list[str]) -> dict[str, Any]:
    placed = sorted(call["placed_at"] for call in calls)
    settled = [a for a in attempts if a["status"] == "ended"]
    ended = max(a["ended_at"].timestamp() for a in settled)
    per_number = Counter(call["to"] for call in calls)
    first_placed: dict[str, float] = {}
    for call in calls:
        first_placed[call["to"]] = min(call["placed_at"], first_placed.get(call["to"], 1e18))
    written_to_placed = [first_placed[a["to_number"]] - a["started_at"].timestamp()
                         for a in attempts if a["to_number"] in first_placed]
    due_to_dial = [moment - due for moment in first_placed.values()]
    dial_span = placed[-1] - placed[0] if len(placed) > 1 else float("nan")
    report = {
        "processes": processes, "tasks": len(numbers),
        "dialled": len(per_number), "dialled_twice": sum(n > 1 for n in per_number.values()),
        "creates": len(calls),
        "dials_per_s": (len(placed) - 1) / dial_span if dial_span > 0 else float("nan"),
        "dial_span_s": dial_span,
        "due_to_dial": _stats(due_to_dial),
        # dials by how many capacity rechecks after the due moment they came
        "waves": [sum(1 for d in due_to_dial if int(d // RECHECK_S) == n)
                  for n in range(int(max(due_to_dial, default=0) // RECHECK_S) + 1)],
        "written_to_placed": _stats(written_to_placed),
        # None: some outcomes were left to the follow-up
        "due_to_all_outcomes_s": ended - due if len(settled) == len(attempts) else None,
        "outcomes_per_s": len(settled) / (ended - due),
        "unsettled": len(attempts) - len(settled),
        "outcomes": dict(Counter(a["outcome"] for a in settled)),
        "callbacks": sum(call["callbacks"] for call in calls),
        "callbacks_refused": sum(call["callbacks_refused"] for call in calls),
        "most_open": most_open(calls),
        "by_process": sorted(Counter(urlsplit(call["status_callback"]).port
                                     for call in calls).values(), reverse=True),
        "written_before_due": written_before_due,
        "log_warnings": sum(log.count("| WARNING") for log in logs),
        "log_errors": sum(log.count("| ERROR") for log in logs),
    }
    print(f"  {processes} process(es), {len(numbers)} tasks: "
          f"{report['dials_per_s']:.1f} dials/s; due → dial p50 "
          f"{report['due_to_dial']['p50']:.2f} s, p95 {report['due_to_dial']['p95']:.2f} s; "
          f"every outcome {_seconds(report['due_to_all_outcomes_s'])} after due "
          f"({report['outcomes_per_s']:.1f}/s, {report['unsettled']} left to the follow-up); "
          f"dialled twice "
          f"{report['dialled_twice']}; by process {report['by_process']}; most open "
          f"{report['most_open']}; outcomes {report['outcomes']}; callbacks refused "
          f"{report['callbacks_refused']} of {report['callbacks']}; log warnings "
          f"{report['log_warnings']}, errors {report['log_errors']}")
    if not written_before_due:
        print("  warning: the tasks were still being written when they fell due")
    return report


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def most_open(calls: list[dict[str, Any]]) -> int:
    """The most calls placed and not yet ended at one moment."""
    edges = sorted([(c["placed_at"], 1) for c in calls]
                   + [(c["ended_at"], -1) for c in calls if c["ended_at"] is not None])
    most = current = 0
    for _moment, step in edges:
        current += step
        most = max(most, current)
    return most


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95),
            "max": max(values) if values else float("nan"), "n": len(values)}
