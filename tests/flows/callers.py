"""A caller talking to the booking graph's engine directly (no audio, no pipeline), on
the demo clinic's data; what they hear and the tools that ran are kept. `call_to` is the
other way round: the clinic calls someone for an outbound task."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date, datetime

from call.call_session import CallLog
from call.identity import CallIdentity
from db import repositories as repo
from flows.graph import ContextGraph, bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from flows.reach import Reach
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
                    today: Callable[[], date] | None = None, reach: Reach | None = None,
                    dialled_number: str | None = None, can_put_through: bool = False,
                    resume: tuple[str, str] | None = None) -> Caller:
    """A call from `phone` to `clinic` (workspace id, service id), started; `now` and
    `today` fix the engine's clock; `reach`: how the clinic texts."""
    workspace_id, service_id = clinic
    writer = CollectingWriter()
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="inbound", from_number=phone, to_number=dialled_number, status="in_progress",
    )
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, service_id, phone))
    clock = {key: value for key, value in (("now", now), ("today", today)) if value}
    engine = GraphEngine(
        graph, session, db.pool, CallLog(call_id, writer), clinic_name="Demo Family Clinic",
        emergency_number="911", reach=reach, dialled_number=dialled_number,
        can_put_through=can_put_through, **clock,
    )
    engine.resume = resume
    await engine.start()
    return Caller(engine, writer)


# --- Calls the clinic makes ------------------------------------------------------------

CLINIC_NUMBER = "+15550100100"  # the number an outbound call comes from


class Callee(Caller):
    """The person who answers a call the clinic placed: `heard` starts with the greeting
    the runner plays (the right-person question); `task_id` is the task it carries out."""

    def __init__(self, engine: GraphEngine, writer: CollectingWriter, greeting: str,
                 task_id: str) -> None:
        super().__init__(engine, writer)
        self.heard.append(greeting)
        self.task_id = task_id

    @property
    def agent_said(self) -> str:
        """Everything the agent said on the call, in one string."""
        return " ".join(self.heard)


async def call_to(db, clinic, phone: str, *, kind: str, patient_id: str | None,
                  reason: str = "the test results they asked about",
                  goal: str = "answer their question", appointment_id: str | None = None,
                  offer: dict | None = None, graph: ContextGraph | None = None,
                  navigator=None) -> Callee:
    """The clinic calls `phone` for a task of `kind` (written to the database with its dial
    job), the engine started on the graph the kind runs; the greeting is the one the
    runner would play."""
    from call.outbound_call import OutboundCall
    from db import outbound
    from flows.catalog import runnable_graph
    from flows.outbound_greeting import outbound_greeting

    workspace_id, service_id = clinic
    async with db.pool.acquire() as conn, conn.transaction():
        task_id = await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=workspace_id, service_id=service_id, kind=kind, reason=reason,
            goal=goal, timezone="America/Chicago", not_before=datetime.now().astimezone(),
            patient_id=patient_id, phone=phone, appointment_id=appointment_id, offer=offer))
        # being dialled: the dispatcher marks the task in progress before it places the call
        await conn.execute("UPDATE outbound_tasks SET status = 'in_progress' WHERE id = $1",
                           uuid.UUID(task_id))
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="outbound", from_number=CLINIC_NUMBER, to_number=phone, status="in_progress",
    )
    call = OutboundCall(
        task_id=task_id, attempt_id=str(uuid.uuid4()), kind=kind, workspace_id=workspace_id,
        service_id=service_id, patient_id=patient_id, phone=phone, reason=reason, goal=goal,
        appointment_id=appointment_id, offer=offer)
    writer = CollectingWriter()
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, service_id, phone))
    engine = GraphEngine(
        graph or runnable_graph(call.graph_id), session, db.pool,
        CallLog(call_id, writer), clinic_name="Demo Family Clinic", emergency_number="911",
        dialled_number=CLINIC_NUMBER, outbound=call, navigator=navigator,
    )
    greeting = await outbound_greeting(db.pool, call, "Demo Family Clinic")
    await engine.start()
    return Callee(engine, writer, greeting, task_id)
