"""Recall states: what a graph looks up before the caller speaks, by the name it gives.

Every recall first identifies the caller by the number they call from (one patient on
that number: identified; several: the graph asks who is calling). Then the graph's own
recall runs: a booking call loads the clinic's services, locations, closures and the
caller's upcoming bookings; a companion check-in loads what the person said on earlier calls
and their open reminders. A graph naming an unknown recall does not load.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta

import asyncpg

from db import companion, world
from db import scheduling as db
from flows.graph import ContextGraph, StateType
from flows.graph_session import GraphSession

Recall = Callable[[GraphSession, asyncpg.Pool], Awaitable[None]]


async def identify_by_phone(session: GraphSession, pool: asyncpg.Pool) -> None:
    if session.caller_number:
        session.phone_matches = await db.patients_by_phone(
            pool, session.workspace_id, session.caller_number
        )
    if len(session.phone_matches) == 1:
        session.patient = session.phone_matches[0]


async def caller_context(session: GraphSession, pool: asyncpg.Pool) -> None:
    session.services = await db.appointment_types(pool, session.service_id)
    session.services_read = bool(session.services)
    session.locations = await db.locations(pool, session.service_id)
    # from yesterday: today in a timezone behind the server's is still the server's yesterday
    session.closures = await db.closures(pool, session.service_id,
                                         date.today() - timedelta(days=1))
    session.practitioners = await db.practitioner_names(pool, session.service_id)
    await identify_by_phone(session, pool)
    if session.patient is not None:
        session.upcoming = await db.upcoming_appointments(
            pool, session.patient.id, datetime.now().astimezone()
        )
        await load_chart(session, pool)


async def load_chart(session: GraphSession, pool: asyncpg.Pool) -> None:
    """The identified caller's chart (the ambient channel's patient context)."""
    session.chart_stale = False
    session.chart = (await world.clinical_context(pool, session.patient.id)
                     if session.patient is not None else None)


async def person_memories(session: GraphSession, pool: asyncpg.Pool) -> None:
    await identify_by_phone(session, pool)
    if session.patient is not None:
        session.memories = await companion.recent_memories(pool, session.patient.id)
        session.reminders = await companion.open_reminders(pool, session.patient.id)


RECALLS: dict[str, Recall] = {
    "caller_context": caller_context,
    "person_memories": person_memories,
}


def unknown_recalls(graph: ContextGraph) -> list[str]:
    """Recall names the graph uses that this engine cannot look up (empty: all known)."""
    return sorted({
        spec.recall for spec in graph.states.values()
        if spec.type is StateType.RECALL and spec.recall not in RECALLS
    })
