"""Booking engine budgets: navigator decision time per turn, tool latency on the embedded database.

Runs whole scripted booking calls (the paths of tests/flows/test_engine.py) through
`flows.graph_engine.GraphEngine` against the demo clinic in a fresh embedded PostgreSQL
(the database `make run` uses), many times over:

- navigator decision: `Reply.nav_ms`, the deterministic navigator's time for a turn
  (routing, understanding, the walk), without the tools it then runs — the booking
  scripts on the clinic graph, the check-in script on the companion graph;
- the Flows node an LLM-engaged call builds from each decision;
- tool latency: every tool call's duration as the call record stores it, and
  separately the availability search alone over two weeks for all ten practitioners.

    python -m bench.booking_engine [--rounds 40]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from pathlib import Path

from loguru import logger

from bench.harness import percentile
from bench.report import measured_line, write_section
from call.call_session import CallLog
from call.identity import CallIdentity
from config import Settings
from db import repositories as repo
from db import scheduling as sched
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import CHECK_IN_GRAPH, CHECK_IN_LINE, seed_demo
from flows.compile import EngageNodes
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from flows.navigator import warm_up
from lib import event_loop
from tests.fakes import CollectingWriter

CHECK_IN = "companion check-in"
SCRIPTS: dict[str, tuple[str | None, list[str]]] = {
    "existing patient books": ("+15550100204", [
        "Hi, I'd like to book a physio appointment", "next week in the morning please",
        "the second one", "yes please", "no that's all, goodbye",
    ]),
    "new caller registers and books": ("+15550100299", [
        "Hello, I need a flu shot", "Sam", "Nair", "February third nineteen ninety",
        "yes that's right", "whenever is soonest", "the first one", "yes", "that's all, bye",
    ]),
    "new caller says it all at once": ("+15550100298", [
        "Hi, this is Jamie Cole, born July 9th 1972, can I get a physio at the end of the "
        "week, mornings if poss?", "no, it's Reid, R-E-I-D", "yes that's right",
        "the first one", "yes", "great, I'd better let you get on",
    ]),
    "shared phone reschedules": ("+15550100202", [
        "I want to reschedule my appointment", "Elena Alvarez",
        "November twentieth nineteen seventy eight", "as soon as possible", "the first one",
        "yes", "goodbye",
    ]),
    "asks prices, then cancels one of two": ("+15550100203", [
        "how much is a blood test?", "okay, I need to cancel an appointment", "the second one",
        "yes please", "bye",
    ]),
    CHECK_IN: ("+15550100201", [  # on the check-in line: the companion_checkin graph
        "I'm doing well, thank you.", "It went beautifully, she played so well.",
        "Yes, I did it this morning.", "I'm thinking of visiting my sister next week.",
        "That's all for today, goodbye.", "No, that's everything.",
    ]),
}


async def _hang_up(_action, _flow_manager) -> None:
    """The node's end-of-call action; never run here (no pipeline)."""


async def run_call(db: Database, workspace_id: str, service_id: str, graph_id: str,
                   phone: str | None, lines: list[str], writer: CollectingWriter,
                   node_ms: list[float]) -> list[float]:
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="eval", from_number=phone, to_number=None, status="in_progress",
    )
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, service_id, phone))
    engine = GraphEngine(bundled_graph(graph_id), session, db.pool,
                           CallLog(call_id, writer), clinic_name="Demo Family Clinic",
                           emergency_number="911")
    nodes = EngageNodes(engine, end_call=_hang_up)
    await engine.start()
    nav_ms = []
    for line in lines:
        reply = await engine.turn(line)
        if engine.failed:
            raise RuntimeError(f"engine failed on {line!r}")
        nav_ms.append(reply.nav_ms)
        started = time.perf_counter()  # what an LLM-engaged call adds: the turn's Flows node
        nodes.node(reply.decisions[0])
        node_ms.append((time.perf_counter() - started) * 1000)
    return nav_ms


async def reset_bookings(db: Database, workspace_id: str, service_id: str) -> None:
    """Undo what the scripts wrote so every round starts from the seeded clinic."""
    await db.pool.execute(
        """DELETE FROM appointments WHERE created_by_call IS NOT NULL;
           UPDATE appointments SET status = 'booked', changed_by_call = NULL
             WHERE status = 'cancelled' AND created_by_call IS NULL;"""
    )
    await db.pool.execute(
        """DELETE FROM memories WHERE source_call IS NOT NULL;
           UPDATE reminders SET acknowledged_at = NULL, acknowledged_by_call = NULL;
           DELETE FROM patients WHERE created_by_call IS NOT NULL;"""
    )


async def availability_ms(db: Database, service_id: str, rounds: int) -> list[float]:
    types = await sched.appointment_types(db.pool, service_id)
    today = date.today()
    timings = []
    for _ in range(rounds):
        for kind in types:
            started = time.perf_counter()
            await sched.available_slots(
                db.pool, service_id, appointment_type=kind, first_day=today,
                last_day=today + timedelta(days=13), now=datetime.now().astimezone(),
            )
            timings.append((time.perf_counter() - started) * 1000)
    return timings


async def main(rounds: int) -> dict:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    warm_up()  # as the service does at start-up: router rules and date parser loaded
    with tempfile.TemporaryDirectory(prefix="bench-booking-", dir="/tmp") as directory:
        db = await Database.connect(Settings(_env_file=None, data_dir=Path(directory)))
        try:
            await apply_migrations(db.pool)
            seeded = await seed_demo(db.pool)
            check_in = await repo.get_service_by_name(db.pool, seeded.workspace_id, CHECK_IN_LINE)
            writer = CollectingWriter()
            nav: dict[str, list[float]] = {name: [] for name in SCRIPTS}
            node_ms: list[float] = []
            for _ in range(rounds):
                for name, (phone, lines) in SCRIPTS.items():
                    service, graph = ((check_in["id"], CHECK_IN_GRAPH) if name == CHECK_IN
                                      else (seeded.service_id, "clinic_booking"))
                    nav[name] += await run_call(
                        db, seeded.workspace_id, service, graph, phone, lines, writer, node_ms
                    )
                await reset_bookings(db, seeded.workspace_id, seeded.service_id)
            availability = await availability_ms(db, seeded.service_id, rounds)
            slots = 0
            for kind in await sched.appointment_types(db.pool, seeded.service_id):
                slots += len(await sched.available_slots(
                    db.pool, seeded.service_id, appointment_type=kind, first_day=date.today(),
                    last_day=date.today() + timedelta(days=13), now=datetime.now().astimezone(),
                ))
        finally:
            await db.close()
    tools: dict[str, list[float]] = {}
    for record in writer.of_type("ToolCallRecord"):
        tools.setdefault(record.name, []).append(record.duration_ms)
    return {"rounds": rounds, "nav": nav, "tools": tools, "availability": availability,
            "slots": slots, "node_ms": node_ms}


def render(report: dict) -> str:
    every = [ms for values in report["nav"].values() for ms in values]
    p95 = percentile(every, 95)
    avail_p95 = percentile(report["availability"], 95)
    lines = [
        "## Booking engine: navigator decision time and tool latency",
        "",
        measured_line("python -m bench.booking_engine"),
        "",
        f"Whole scripted calls through `flows.graph_engine.GraphEngine` (deterministic navigator, "
        f"real tools, spoken lines) against the demo clinic in a fresh embedded PostgreSQL, "
        f"{report['rounds']} rounds of each script; bookings reset between rounds.",
        "",
        "### Navigator decision per caller turn (target p95 < 2 ms)",
        "",
        "| Script | Turns | p50 | p95 | max |",
        "|---|---|---|---|---|",
    ]
    for name, values in report["nav"].items():
        lines.append(f"| {name} | {len(values)} | {percentile(values, 50):.2f} ms "
                     f"| {percentile(values, 95):.2f} ms | {max(values):.2f} ms |")
    lines += [
        f"| **all** | {len(every)} | {percentile(every, 50):.2f} ms | **{p95:.2f} ms** "
        f"| {max(every):.2f} ms |",
        "",
        f"Target p95 < 2 ms: **{'met' if p95 < 2 else 'NOT met'}**. The check-in script runs "
        f"the companion graph on the same engine.",
        "",
        f"With an LLM configured, each turn's decision also becomes the `pipecat.flows` node the "
        f"engage LLM runs (task, settled facts, the state's tool schemas): "
        f"p50 {percentile(report['node_ms'], 50):.2f} ms, "
        f"p95 {percentile(report['node_ms'], 95):.2f} ms over {len(report['node_ms'])} turns.",
        "",
        "### Tools against the embedded database",
        "",
        f"Availability search alone, each of the 6 appointment types over two weeks for the "
        f"clinic's 10 practitioners ({report['slots']} open slots in all), "
        f"{len(report['availability'])} searches: p50 "
        f"{percentile(report['availability'], 50):.1f} ms, **p95 {avail_p95:.1f} ms** "
        f"(target < 20 ms: **{'met' if avail_p95 < 20 else 'NOT met'}**).",
        "",
        "Every tool call the scripts made, as the call record times it (guards included):",
        "",
        "| Tool | Calls | p50 | p95 |",
        "|---|---|---|---|",
    ]
    for name, values in sorted(report["tools"].items()):
        lines.append(f"| {name} | {len(values)} | {percentile(values, 50):.0f} ms "
                     f"| {percentile(values, 95):.0f} ms |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.rounds))
    print(render(result))
    if not args.no_docs:
        write_section("booking-engine", render(result))
