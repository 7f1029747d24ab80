"""After a booking: what its confirmation text and its links add to the booking turn.

An existing patient books a physiotherapy session through `flows.graph_engine.GraphEngine`
(deterministic navigator, real tools) on the demo clinic in a fresh embedded PostgreSQL,
many rounds, under four conditions:

- nothing set up: the booking alone, as before texts existed;
- texts: the confirmation texted through the Twilio stand-in;
- texts and links: the visit is a video visit (a Daily room) that takes a deposit (a
  Stripe payment link), both made, then texted;
- video provider stalled: Daily does not answer; the call waits its bound, says the link
  will follow by text, and a job is queued.

Timed: the caller's "yes" to the read-back → the line the agent says (the booking turn),
and each follow-up tool's duration as the call record stores it. The stand-ins answer on
this machine, so the texts-and-links rows are what our side costs; a real provider adds
its round trip (Twilio, Daily and Stripe typically answer in 100-500 ms), never more than
the bound: 1.5 s for a text, `LINK_PROVIDER_TIMEOUT_S` (2 s) for each link.

    python -m bench.post_booking [--rounds 20]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import logging
import sys
import tempfile
import time
import uuid
from pathlib import Path

from loguru import logger

from bench.booking_engine import reset_bookings
from bench.report import measured_line, percentile, publish
from call.call_session import CallLog
from call.identity import CallIdentity
from config import Settings
from db import repositories as repo
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import DEMO_NUMBER, seed_demo
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from flows.navigator import warm_up
from flows.reach import Reach
from lib import event_loop
from tests.fakes import CollectingWriter
from tests.reach_stand_ins import reach_through_stand_ins

PHONE = "+15550100204"
BEFORE_YES = ["Hi, I'd like to book a physio appointment", "next week in the morning please",
              "the first one"]
FOLLOW_UPS = ("GetTelehealthLink", "CreatePaymentLink", "SendTextMessage")
CONDITIONS = ("nothing set up", "texts", "texts and links", "video provider stalled")
STALL_S = 5.0


async def clinic_is(db: Database, service_id: str, *, video: bool, deposit: bool) -> None:
    await db.pool.execute("UPDATE services SET video_visits = $2 WHERE id = $1",
                          uuid.UUID(service_id), {"provider": "daily"})
    await db.pool.execute(
        "UPDATE appointment_types SET video = $2, deposit_cents = $3 WHERE service_id = $1",
        uuid.UUID(service_id), video, 2500 if deposit else None)


async def booking_turn(db: Database, workspace_id: str, service_id: str, reach: Reach | None,
                       writer: CollectingWriter) -> float:
    """One call up to the booking; the booking turn's milliseconds."""
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="eval", from_number=PHONE, to_number=DEMO_NUMBER, status="in_progress")
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, service_id, PHONE))
    engine = GraphEngine(bundled_graph("clinic_booking"), session, db.pool,
                         CallLog(call_id, writer), clinic_name="Demo Family Clinic",
                         emergency_number="911", reach=reach, dialled_number=DEMO_NUMBER)
    await engine.start()
    for line in BEFORE_YES:
        await engine.turn(line)
    started = time.perf_counter()
    reply = await engine.turn("yes please")
    elapsed = (time.perf_counter() - started) * 1000
    if not reply.text.startswith("You're booked"):
        raise RuntimeError(f"not booked: {reply.text!r}")
    return elapsed


async def main(rounds: int) -> dict:
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    logging.disable(logging.INFO)  # the SDKs' and the stand-ins' request lines
    warm_up()
    turns: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    tools: dict[str, dict[str, list[float]]] = {name: {} for name in CONDITIONS}
    with tempfile.TemporaryDirectory(prefix="bench-post-booking-", dir="/tmp") as directory:
        db = await Database.connect(Settings(_env_file=None, data_dir=Path(directory)))
        try:
            await apply_migrations(db.pool)
            seeded = await seed_demo(db.pool)
            async with reach_through_stand_ins(db.pool, DEMO_NUMBER) as stand_ins:
                reach, daily = stand_ins.reach, stand_ins.daily
                for condition in CONDITIONS:
                    await clinic_is(db, seeded.service_id, video=condition != "texts",
                                    deposit=condition == "texts and links")
                    writer = CollectingWriter()
                    for _ in range(rounds):
                        if condition == "video provider stalled":
                            daily.stall_next(STALL_S)
                        turns[condition].append(await booking_turn(
                            db, seeded.workspace_id, seeded.service_id,
                            None if condition == "nothing set up" else reach, writer))
                        await reset_bookings(db, seeded.workspace_id, seeded.service_id)
                        await db.pool.execute("DELETE FROM visit_links")
                    for record in writer.of_type("ToolCallRecord"):
                        if record.name in FOLLOW_UPS:
                            tools[condition].setdefault(record.name, []).append(
                                record.duration_ms)
        finally:
            await db.close()
    return {"rounds": rounds, "turns": turns, "tools": tools}


def render(report: dict) -> str:
    base = percentile(report["turns"]["nothing set up"], 50)
    lines = [
        "## After a booking: the confirmation text and the visit's links",
        "",
        measured_line("python -m bench.post_booking"),
        "",
        f"An existing patient books a physiotherapy session (`GraphEngine`, deterministic "
        f"navigator, real tools, embedded PostgreSQL), {report['rounds']} calls per "
        f"condition; Twilio, Daily and Stripe are their local stand-ins reached through the "
        f"real adapters (HTTP on this machine). The booking turn is the caller's yes to the "
        f"read-back → the line the agent says.",
        "",
        "| Condition | Booking turn p50 | p95 | added at p50 |",
        "|---|---|---|---|",
    ]
    for name, values in report["turns"].items():
        p50 = percentile(values, 50)
        lines.append(f"| {name} | {p50:.0f} ms | {percentile(values, 95):.0f} ms "
                     f"| {p50 - base:+.0f} ms |")
    lines += [
        "",
        "Each follow-up as the call record times it:",
        "",
        "| Condition | Tool | Calls | p50 | p95 |",
        "|---|---|---|---|---|",
    ]
    for condition, timed in report["tools"].items():
        for name in FOLLOW_UPS:
            if name in timed:
                values = timed[name]
                lines.append(f"| {condition} | {name} | {len(values)} "
                             f"| {percentile(values, 50):.0f} ms "
                             f"| {percentile(values, 95):.0f} ms |")
    lines += [
        "",
        "What this means for a caller: the booking line waits for the links (made side by "
        "side) and then the text, so a real provider's round trip is added to it: Twilio, "
        "Daily and Stripe each typically answer in a few hundred milliseconds. Each wait is "
        "bounded: the text 1.5 s, a link `LINK_PROVIDER_TIMEOUT_S` (2 s; each of its two "
        "requests half of that). A stalled provider costs the caller its bound once, then "
        "the link is left to a job and the caller hears it will follow by text. The offline "
        "turn's filler is offered when the call's learned wait for a turn is long "
        "(processors/emotion/fillers.py). Nothing here holds the audio path: frames keep "
        "flowing while the tool waits.",
    ]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    publish("post_booking", render(event_loop.run(main(args.rounds))), docs=not args.no_docs)
