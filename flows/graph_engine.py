"""One call's context-graph engine: prefetch, then navigate → tools → say, turn by turn.

`GraphEngine.start` is the graph's `init` recall state: it looks up the caller by
the number they call from, their upcoming bookings, the clinic's services and
locations (bounded; a slow database leaves the call unidentified, not silent). Each
`turn` navigates (flows/navigator), records every transition, runs the tools of
passed-through tool_call states and of the chosen action, follows the exit a write
opens (booked → wrap-up) and returns what to say. If the graph cannot be walked the
engine says so in the call record and `failed` turns on: the caller is then answered
in static prompt mode by whatever comes next in the pipeline, never left in silence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import asyncpg
from loguru import logger

from call.call_session import CallLog
from call.outbound_call import OutboundCall
from config.memory import MemorySettings
from db.deadline import within
from flows.ambient import ambient_context
from flows.callee import Callee
from flows.clinic_calendar import clinic_today, open_lines
from flows.engage_local import engage, welcome_back
from flows.graph import ContextGraph
from flows.graph_session import GraphSession
from flows.graph_tools import GraphTools
from flows.navigator import (
    DeterministicNavigator,
    FillerSink,
    Hop,
    NavDecision,
    NavigationError,
    Navigator,
    opening,
    settle,
    took_action,
    understand_targets,
)
from flows.outbound_tools import finish
from flows.reach import Reach
from flows.recalls import RECALLS, load_chart
from processors.world.index import WorldIndex
from services.practice.base import PracticeSystem

PREFETCH_TIMEOUT_S = 2.0
# What the agent says once a task is done; a request still waiting is taken up instead of
# the open question (or right after the answer).
TASK_DONE = {"ask_how_can_help": True, "answer_current_booking_status": False}
CHART_TIMEOUT_S = 0.5


@dataclass
class Reply:
    """What the agent says this turn, and what happens after it is said."""

    text: str
    decisions: list[NavDecision] = field(default_factory=list)
    nav_ms: float = 0.0
    end_call: bool = False  # the terminal state: hang up once this has been said
    transfer_to: str | None = None  # dial this once this has been said


class GraphEngine:
    def __init__(
        self, graph: ContextGraph, session: GraphSession, pool: asyncpg.Pool, log: CallLog, *,
        clinic_name: str, emergency_number: str, today: Callable[[], date] | None = None,
        transfer_number: str | None = None, navigator: Navigator | None = None,
        index: WorldIndex | None = None, practice: PracticeSystem | None = None,
        dialled_number: str | None = None, country_code: str = "1",
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        outbound: OutboundCall | None = None, reach: Reach | None = None,
        can_put_through: bool = False, memory: MemorySettings | None = None,
    ) -> None:
        """`outbound`: the clinic placed this call for a task (flows/callee.py): the
        callee is loaded at start but identified only by the right-person check, and
        the task is closed when the call reaches its end. `reach`: how the deployment
        texts patients beyond the call (flows/post_booking_tools). `dialled_number`: the
        clinic's number on this call (the one dialled, or the one an outbound call comes
        from).
        `today`: the date the caller's words are read against ("tomorrow"); by default
        the clinic's own date at `now` (`clinic_today`), whatever the server's timezone.
        `can_put_through`: a person can be put on this call (a warm hand-off). `memory`:
        how the caller's memories fade and are searched (config MEMORY_*)."""
        self.graph, self.session, self.pool, self.log = graph, session, pool, log
        session.can_put_through = can_put_through
        if memory is not None:
            session.memory_policy = memory
        today = today or (lambda: clinic_today(session.locations, now(), dialled_number))
        if outbound is not None and session.callee is None:
            session.callee = Callee(outbound)
        self.navigator = navigator or DeterministicNavigator(graph)
        self.tools = GraphTools(
            graph, session, pool, log, today=today, clinic_transfer_number=transfer_number,
            index=index, practice=practice, country_code=country_code, now=now,
            dialled_number=dialled_number, reach=reach, clinic_name=clinic_name,
        )
        self._now = now
        self.dialled_number = dialled_number
        self.clinic_name = clinic_name
        self.emergency_number = emergency_number
        self._today = today
        self.state = graph.initial_state
        self.failed = False
        # (state, action): where a call taken back by the agent goes on from, its greeting
        # having asked that action's question (None: from the start)
        self.resume: tuple[str, str] | None = None

    @property
    def navigates_by_model(self) -> bool:
        """A model picks the actions (it offers its own filler while it thinks)."""
        return not isinstance(self.navigator, DeterministicNavigator)

    async def start(self) -> None:
        """The init (recall) state: what the call needs before the caller speaks.

        The state moves to the greeting first, so a caller who speaks before the
        prefetch ends is answered from there (with less context), never from `init`.
        """
        first = opening(self.graph, self.session)
        self._record(first.hops)
        self.state = first.state
        if self.resume is not None and self.resume[0] in self.graph.states and (
                self.resume[1] in self.graph.actions):
            # the call comes back to the agent mid-way (a person could not be reached):
            # its greeting asked this state's question
            self.state = self.resume[0]
            took_action(self.session, self.resume[1])
        try:
            await within(self._prefetch(), PREFETCH_TIMEOUT_S, what="call prefetch")
        except Exception as error:  # noqa: BLE001 - the call goes on without the context
            logger.warning(f"call {self.session.call_id}: prefetch failed ({type(error).__name__})")
            self.log.event("prefetch_failed", error=type(error).__name__)

    async def _prefetch(self) -> None:
        recall = self.graph.states[self.graph.initial_state].recall
        await RECALLS[recall or "caller_context"](self.session, self.pool)

    @property
    def chart_outdated(self) -> bool:
        """A write or a new identification changed what the caller's chart should say."""
        session = self.session
        loaded = session.chart.patient.id if session.chart is not None else None
        current = session.patient.id if session.patient is not None else None
        return session.chart_stale or loaded != current

    async def refresh_chart(self) -> None:
        """Load the chart again when it is out of date (bounded: a slow database keeps
        the previous one and says so in the record)."""
        if not self.chart_outdated:
            return
        try:
            await within(load_chart(self.session, self.pool), CHART_TIMEOUT_S, what="chart")
        except Exception as error:  # noqa: BLE001 - the call goes on with what it had
            logger.warning(f"call {self.session.call_id}: chart not refreshed "
                           f"({type(error).__name__})")
            self.log.event("chart_unavailable", error=type(error).__name__)

    async def navigate_turn(
        self, caller_text: str, *, filler: FillerSink | None = None
    ) -> tuple[NavDecision, float]:
        """Navigate one caller turn to an action state, recorded; and the navigator's ms.

        The tools of tool_call states met on the way run here (they are not the model's
        to call). Raises NavigationError (or KeyError/ValueError) if the graph cannot
        be walked; the caller of this method switches to static prompt mode.
        """
        started = time.perf_counter()
        if self.session.can_put_through:
            self.session.open_lines = open_lines(self.session.locations, self.session.closures,
                                                 self._now())
        decision = await self.navigator.navigate(
            self.session, self.state, caller_text, self._today(), filler=filler
        )
        decision, tool_s = await self._through_tool_states(decision)
        nav_s = time.perf_counter() - started - tool_s  # the navigator's time, not the tools'
        self._record(decision.hops)
        self.state = decision.state
        await self._arrived()
        return decision, nav_s * 1000

    async def _through_tool_states(self, decision: NavDecision) -> tuple[NavDecision, float]:
        """Run the tools of the tool_call states the walk stopped in, resuming after each;
        the decision it ends on, and the seconds the tools took."""
        tool_s = 0.0
        while decision.pending_tool is not None:  # a tool_call state: its tool runs first
            self._record(decision.hops)
            started = time.perf_counter()
            await self.tools.call(decision.state, decision.pending_tool, {})
            tool_s += time.perf_counter() - started
            understand_targets(self.session, decision.turn)
            decision = await self.navigator.resume(self.session, decision.state, decision.turn)
        return decision, tool_s

    def expected_field(self) -> str | None:
        """The structured field the caller is answering for (what the last action asked)."""
        action = self.graph.actions.get(self.session.last_action or "")
        return action.captures if action is not None else None

    def ambient(self) -> str:
        """The patient and clinic context for the system prompt, as the call knows it now."""
        return ambient_context(self.session, dialled=self.dialled_number, now=self._now())

    async def settle(self) -> NavDecision | None:
        """After a write: the exit its outcome opens, recorded (None: the state stays);
        tool_call states on the way run their tools, as in a caller's turn."""
        after = settle(self.graph, self.session, self.state)
        if after is not None:
            after, _ = await self._through_tool_states(after)
            self._record(after.hops)
            self.state = after.state
            await self._arrived()
        return after

    async def _arrived(self) -> None:
        """An outbound call that reached its end closes its task (before the goodbye plays:
        what the call found is known by then)."""
        if self.session.callee is not None and self.state in self.graph.terminal_states:
            await self.finish_outbound()

    async def finish_outbound(self) -> None:
        """Close an outbound call's task with what the call found, once (also when the
        call ends before its last state: the callee hung up). Never raises."""
        await finish(self.session, self.pool, self.log)

    @property
    def clinic_number(self) -> str | None:
        """The clinic's own number on this call, for "call us on ..." (never one made up)."""
        return self.dialled_number or next(
            (loc.phone_number for loc in self.session.locations if loc.phone_number), None)

    async def turn(self, caller_text: str, *, filler: FillerSink | None = None) -> Reply:
        """Answer one caller turn with the offline lines (raises nothing: a broken graph
        switches `failed` on). A model navigator's filler goes to `filler` at once."""
        try:
            decision, nav_ms = await self.navigate_turn(caller_text, filler=filler)
        except (NavigationError, KeyError, ValueError) as error:
            self.fail(error)
            return Reply("")
        said = [await self._say(decision, caller_text)]
        decisions = [decision]
        after = await self.settle()
        if after is not None:
            # never the same thing twice in one reply; a caller being put through hears
            # "please hold" last, not a goodbye
            if after.action != decision.action and not (after.terminal
                                                         and self.session.handoff_to):
                said.append(await self._say(after, caller_text))
            decisions.append(after)
        done = TASK_DONE.get(decisions[-1].action)
        if done is not None and self.session.pending_requests:
            next_request = self.session.pending_requests.pop(0)  # asked for in the same breath
            try:
                decision, more_ms = await self.navigate_turn(next_request, filler=filler)
            except (NavigationError, KeyError, ValueError) as error:
                self.fail(error)
                return Reply("")
            nav_ms += more_ms
            line = await self._say(decision, next_request)
            if done:  # the open question gives way to the request
                said[-1] = line
            else:
                said.append(line)
            decisions.append(decision)
        said.insert(0, welcome_back(self.session))
        return Reply(
            " ".join(line for line in said if line), decisions, nav_ms,
            end_call=decisions[-1].terminal, transfer_to=self.session.handoff_to,
        )

    async def _say(self, decision: NavDecision, caller_text: str) -> str:
        engaged = await engage(
            decision.action, decision.state, self.session, self.tools, caller_text=caller_text,
            clinic=self.clinic_name, emergency_number=self.emergency_number,
            clinic_number=self.clinic_number,
        )
        return engaged.text

    def _record(self, hops: list[Hop]) -> None:
        for hop in hops:
            self.log.transition(hop.previous, hop.next, hop.reason)

    def fail(self, error: Exception) -> None:
        self.failed = True
        logger.error(f"call {self.session.call_id}: context graph failed ({error})")
        self.log.event("context_graph_failed", state=self.state, error=str(error)[:200])
