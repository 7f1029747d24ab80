"""Personas: task success, turns per task and repeated questions, offline.

Every persona in scenarios/personas/ calls the real service (`python main.py serve`,
no keys: the deterministic context-graph engine) over the text path, against the
demo clinic in a fresh embedded PostgreSQL, played by the rule-based caller; the
clinic's bookings are reset after each call. Each call is judged from its record
(simulator/personas/judge.py).

    python -m bench.personas [--personas scenarios/personas] [--only NAME ...] [--no-docs]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loguru import logger

from bench.booking_engine import reset_bookings
from bench.report import bench_parser, measured_line, percentile, publish
from config import Settings
from db import repositories as repo
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import seed_demo
from lib import event_loop
from runner.dev_credentials import twilio_auth_token
from simulator.personas.model import Persona, load_personas
from simulator.personas.run import PersonaRun, run_personas, summary
from tests.e2e.service_process import start_service

PERSONAS = Path(__file__).resolve().parent.parent / "scenarios" / "personas"
PAUSE_S = 0.1  # the caller answers at once: the bench measures the conversation, not pace


# What a bench reads from the database after the persona calls, before it is dropped.
Inspect = Callable[[Database, list[PersonaRun]], Awaitable[Any]]


async def main(personas: list[Persona], *, inspect: Inspect | None = None,
               after_each: Callable[[Database], Awaitable[None]] | None = None) -> dict:
    """Every persona calls the service; `after_each` reads the database after each call,
    before the clinic is reset; `inspect` once all have called."""
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    with tempfile.TemporaryDirectory(prefix="bench-personas-", dir="/tmp") as directory:
        root = Path(directory)
        db = await Database.connect(Settings(_env_file=None, data_dir=root / "db"))
        try:
            await apply_migrations(db.pool)
            seeded = await seed_demo(db.pool)
            api_key = await repo.create_api_key(db.pool, seeded.workspace_id, "bench")
            env = {"DATABASE_URL": db.dsn, "DATA_DIR": str(root / "service"),
                   "LOG_LEVEL": "WARNING"}
            service = await asyncio.to_thread(start_service, env, root / "service.log")
            settings = Settings(_env_file=None, data_dir=root / "service")
            try:
                started = time.perf_counter()
                async def between() -> None:
                    if after_each is not None:
                        await after_each(db)
                    await reset_bookings(db, seeded.workspace_id, seeded.service_id)

                runs = await run_personas(
                    personas, between=between,
                    base_url=service.url, api_key=api_key,
                    twilio_token=twilio_auth_token(settings), text_mode=True,
                    log=lambda _line: None, pause_s=PAUSE_S,
                )
                took_s = time.perf_counter() - started
                inspected = await inspect(db, runs) if inspect is not None else None
            finally:
                service.stop()
        finally:
            await db.close()
    return {"runs": runs, "took_s": took_s, "inspected": inspected}


def engine_notes(run: PersonaRun) -> str:
    """The persona's failure reasons, in one table cell."""
    return "; ".join(run.verdict.reasons).replace("|", "/") or "-"


def render(report: dict) -> str:
    runs: list[PersonaRun] = report["runs"]
    totals = summary(runs)
    tasks = sum(len(run.persona.tasks) for run in runs)
    turns = [run.verdict.turns_per_task for run in runs]
    succeeded = [run.verdict.turns_per_task for run in runs if run.verdict.success]
    loops = sum(1 for run in runs if run.verdict.longest_repeat > 2)
    lines = [
        "## Personas: task success, turns per task, repeated questions",
        "",
        measured_line("python -m bench.personas"),
        "",
        f"{len(runs)} personas (scenarios/personas/, {tasks} tasks) each call the real service "
        "over the text path with no keys (the deterministic context-graph engine), against the "
        "demo clinic in a fresh embedded PostgreSQL, reset after each call. The caller is the "
        "rule-based persona: it answers what the agent asks from its facts, with its habits "
        "(simulator/personas/). Each call is judged from its record: the expected writes for the "
        "right patient and nothing else, every booking write right after an explicit yes to "
        f"its read-back, the right redirect or escalation, the call ended properly. "
        f"{report['took_s']:.0f} s in all.",
        "",
        f"- **Task success: {totals['succeeded']}/{totals['total']} personas "
        f"({100 * totals['success_rate']:.0f}%)** (target ≥ 95%)",
        f"- Writes without an explicit yes to their read-back: **{totals['unconfirmed_writes']}**"
        f" (target 0); writes the agent attempted that a guard refused: "
        f"{totals['blocked_writes']}",
        f"- Repeated agent questions: {totals['repeated_questions']} in all; calls where one "
        f"question was asked three or more times in a row: **{loops}** (target 0)",
        f"- Caller turns per task: p50 {percentile(turns, 50):.1f}, p95 {percentile(turns, 95):.1f}"
        + (f"; in successful calls p50 {percentile(succeeded, 50):.1f}" if succeeded else ""),
        "",
        "| Persona | Tasks | Success | Caller turns | Turns/task | Repeated questions | "
        "Ended | Why it failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        verdict = run.verdict
        lines.append(
            f"| {verdict.persona} | {len(run.persona.tasks)} | "
            f"{'yes' if verdict.success else '**no**'} | {verdict.turns} | "
            f"{verdict.turns_per_task:.1f} | {verdict.repeated_questions}"
            f"{f' (max {verdict.longest_repeat} in a row)' if verdict.repeated_questions else ''}"
            f" | {verdict.completion_reason or '-'} | {engine_notes(run)} |")
    return "\n".join(lines)


def parse_args():
    parser = bench_parser(__doc__)
    parser.add_argument("--personas", type=Path, default=PERSONAS,
                        help="a persona file or folder (default scenarios/personas)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these personas")
    parser.add_argument("--show", action="store_true",
                        help="print the transcript of every call that failed")
    return parser.parse_args()


def transcripts(runs: list[PersonaRun]) -> str:
    """The failed calls as the record has them, to see where the agent went wrong."""
    out = []
    for run in runs:
        if run.verdict.success or run.result is None or run.result.record is None:
            continue
        out.append(f"--- {run.persona.name}: {'; '.join(run.verdict.reasons)}")
        for turn in run.result.record.get("turns") or []:
            out.append(f"  {turn.get('speaker_role')!s:>7}: {turn.get('text')}")
    return "\n".join(out)


if __name__ == "__main__":
    args = parse_args()
    chosen = load_personas(args.personas)
    if args.only:
        chosen = [p for p in chosen if p.name in set(args.only)]
    result = event_loop.run(main(chosen))
    if args.show:
        print(transcripts(result["runs"]))
    publish("personas", render(result), docs=not args.no_docs)
