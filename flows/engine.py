"""One call's context-graph engine: prefetch, then navigate → tools → say, turn by turn.

`BookingEngine.start` is the graph's `init` recall state: it looks up the caller by
the number they call from, their upcoming bookings, the clinic's services and
locations (bounded; a slow database leaves the call unidentified, not silent). Each
`turn` navigates (flows/navigator), records every transition, runs the tools of
passed-through tool_call states and of the chosen action, follows the exit a write
opens (booked → wrap-up) and returns what to say. If the graph cannot be walked the
engine says so in the call record and `failed` turns on: the caller is then answered
in static prompt mode by whatever comes next in the pipeline, never left in silence.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime

import asyncpg
from loguru import logger

from db import scheduling as db
from flows.engage_local import engage
from flows.graph import ContextGraph
from flows.navigator import (
    Hop,
    NavDecision,
    NavigationError,
    navigate,
    settle,
    understand_targets,
    walk,
)
from flows.session import BookingSession
from flows.tools import BookingTools
from services.call_session import CallLog

PREFETCH_TIMEOUT_S = 2.0


@dataclass
class Reply:
    """What the agent says this turn, and what happens after it is said."""

    text: str
    decisions: list[NavDecision] = field(default_factory=list)
    nav_ms: float = 0.0
    end_call: bool = False  # the terminal state: hang up once this has been said
    transfer_to: str | None = None  # dial this once this has been said


class BookingEngine:
    def __init__(
        self, graph: ContextGraph, session: BookingSession, pool: asyncpg.Pool, log: CallLog, *,
        clinic_name: str, emergency_number: str, today: Callable[[], date] = date.today,
        transfer_number: str | None = None,
    ) -> None:
        self.graph, self.session, self.pool, self.log = graph, session, pool, log
        self.tools = BookingTools(
            graph, session, pool, log, today=today, clinic_transfer_number=transfer_number
        )
        self.clinic_name = clinic_name
        self.emergency_number = emergency_number
        self._today = today
        self.state = graph.initial_state
        self.failed = False

    async def start(self) -> None:
        """The init (recall) state: what the call needs before the caller speaks.

        The state moves to the greeting first, so a caller who speaks before the
        prefetch ends is answered from there (with less context), never from `init`.
        """
        greeting = self.graph.states[self.graph.initial_state].exits[0]
        entry = self.graph.entry_state(greeting.to)
        self._record([Hop(self.state, entry, greeting.name)])
        self.state = entry
        self.session.last_action = self.graph.states[entry].actions[0]
        try:
            await asyncio.wait_for(self._prefetch(), PREFETCH_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - the call goes on without the context
            logger.warning(f"call {self.session.call_id}: prefetch failed ({type(error).__name__})")
            self.log.event("prefetch_failed", error=type(error).__name__)

    async def _prefetch(self) -> None:
        session = self.session
        session.services = await db.appointment_types(self.pool, session.service_id)
        session.services_read = bool(session.services)
        session.locations = await db.locations(self.pool, session.service_id)
        if session.caller_phone:
            session.phone_matches = await db.patients_by_phone(
                self.pool, session.workspace_id, session.caller_phone
            )
        if len(session.phone_matches) == 1:
            session.patient = session.phone_matches[0]
        if session.patient is not None:
            session.upcoming = await db.upcoming_appointments(
                self.pool, session.patient.id, datetime.now().astimezone()
            )

    async def turn(self, caller_text: str) -> Reply:
        """Answer one caller turn (raises nothing: a broken graph switches `failed` on)."""
        started = time.perf_counter()
        try:
            decision = navigate(self.graph, self.session, self.state, caller_text, self._today())
            nav_ms = (time.perf_counter() - started) * 1000
            while decision.pending_tool is not None:  # a tool_call state: its tool runs first
                self._record(decision.hops)
                await self.tools.call(decision.state, decision.pending_tool, {})
                understand_targets(self.session, decision.turn)
                decision = walk(
                    self.graph, self.session, decision.state, decision.turn, tool_done=True
                )
        except (NavigationError, KeyError, ValueError) as error:
            self._fail(error)
            return Reply("", nav_ms=(time.perf_counter() - started) * 1000)
        self._record(decision.hops)
        said = [await self._say(decision, caller_text)]
        decisions = [decision]
        after = settle(self.graph, self.session, decision.state)
        if after is not None:
            self._record(after.hops)
            if after.action != decision.action:  # never the same thing twice in one reply
                said.append(await self._say(after, caller_text))
            decisions.append(after)
        self.state = decisions[-1].state
        return Reply(
            " ".join(line for line in said if line), decisions, nav_ms,
            end_call=decisions[-1].terminal, transfer_to=self.session.transfer_to,
        )

    async def _say(self, decision: NavDecision, caller_text: str) -> str:
        engaged = await engage(
            decision.action, decision.state, self.session, self.tools, caller_text=caller_text,
            clinic=self.clinic_name, emergency_number=self.emergency_number,
        )
        return engaged.text

    def _record(self, hops: list[Hop]) -> None:
        for hop in hops:
            self.log.transition(hop.previous, hop.next, hop.reason)

    def _fail(self, error: Exception) -> None:
        self.failed = True
        logger.error(f"call {self.session.call_id}: context graph failed ({error})")
        self.log.event("context_graph_failed", state=self.state, error=str(error)[:200])
