"""A caller talking to the booking graph's engine directly (no audio, no pipeline), on
the demo clinic's data; what they hear and the tools that ran are kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime

from call.call_session import CallLog
from call.identity import CallIdentity
from db import repositories as repo
from flows.graph import ContextGraph, bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from tests.fakes import CollectingWriter

GRAPH = bundled_graph("clinic_booking")
PRIYA_PHONE, FAMILY_PHONE, DAVID_PHONE = "+15550100204", "+15550100202", "+15550100203"


class Caller:
    def __init__(self, engine: GraphEngine, writer: CollectingWriter) -> None:
        self.engine, self.writer = engine, writer
        self.heard: list[str] = []

    async def says(self, text: str) -> str:
        reply = await self.engine.turn(text)
        self.heard.append(reply.text)
        self.last = reply
        return reply.text

    def tool_calls(self, name: str | None = None) -> list:
        return [r for r in self.writer.of_type("ToolCallRecord") if name in (None, r.name)]


async def call_from(db, clinic, phone: str | None, *, graph: ContextGraph = GRAPH,
                    now: Callable[[], datetime] | None = None,
                    today: Callable[[], date] | None = None) -> Caller:
    """A call from `phone` to `clinic` (workspace id, service id), started; `now` and
    `today` fix the engine's clock."""
    workspace_id, service_id = clinic
    writer = CollectingWriter()
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="inbound", from_number=phone, to_number=None, status="in_progress",
    )
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, service_id, phone))
    clock = {key: value for key, value in (("now", now), ("today", today)) if value}
    engine = GraphEngine(
        graph, session, db.pool, CallLog(call_id, writer), clinic_name="Demo Family Clinic",
        emergency_number="911", **clock,
    )
    await engine.start()
    return Caller(engine, writer)
