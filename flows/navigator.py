"""The deterministic navigator: one caller turn → the action state and action to speak.

Each turn it (1) routes the words (flows/router), (2) records what they settle in the
session: task kind, the slot picked, an explicit yes to exactly what was read back,
a name or date of birth, preferred days (language/understanding), then (3) walks the
graph: from the current state it takes the first exit whose `when` condition holds
(the state's own exits, then the graph's global ones), passes through decision,
annotation, recall and tool_call states, and stops in the first action state where no
exit holds, choosing the first action whose `action_when` holds. A state is entered at
most once per turn, so no graph can loop.

Conditions are data in the graph (`when: {task: book, identified: true}`); the
predicates they may name are the `PREDICATES` below, checked when the graph loads
(`condition_problems`). Plain functions over plain data: a turn costs microseconds.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Protocol

from db.slots import Slot
from flows.callee import CALLEE_STATUSES
from flows.graph import RETURN, ContextGraph, StateType
from flows.graph_session import (
    Confirmation,
    GraphSession,
    NewPatientDetails,
    attendance_subject,
    cancel_subject,
    reminder_subject,
)
from flows.guards import entry_refused
from flows.right_person import ASK_CALLEE_BIRTH_DATE, understand_callee
from flows.router import (
    CRISIS_ROUTE,
    NO_ROUTE,
    RED_FLAG_ROUTE,
    RouteDecision,
    TaskKind,
    requests_in_order,
    route_turn,
)
from language.affirmation import Answer, classify_answer
from language.caller_identity import (
    answered_name,
    closer_to_first,
    corrected_birth_date,
    introduced_name,
    short_name,
    spelled_words,
    volunteered_birth_date,
    volunteered_phone,
)
from language.time_preferences import (
    excluded_weekdays,
    flexible_days,
    part_of_day,
    preferred_days,
)
from language.time_preferences import warm_up as warm_up_time_words
from language.understanding import appointment_type, date_of_birth, named, slot_choice

MAX_HOPS = 12
# The same question at most this many times in a row; the next time the graph's global
# `stuck` exit is taken instead (a callback or a person is offered).
MAX_SAME_QUESTION = 2
# ... and at most this many times between two things getting done (a loop of two
# questions, each answered in a way that leads back to the other, is stuck too).
MAX_ASKED_BETWEEN_OUTCOMES = 3
STUCK_EXIT = "stuck"
# A check-in call winds down after nine minutes.
LATE_IN_CALL_S = 9 * 60

# A slot read back for a yes (a waitlist offer reads its slot back the same way).
FINAL_READBACK = frozenset({"final_slot_confirmation", "reconfirm_selected_slot",
                            "offer_waitlist_slot"})
CANCEL_READBACK = frozenset({
    "confirm_current_booking_cancellation", "confirm_all_current_bookings_cancellation",
    "confirm_just_booked_cancellation",
})
ATTENDANCE_READBACK = frozenset({"ask_to_confirm_appointment", "read_reminder"})
CALLBACK_NUMBER_QUESTIONS = frozenset({
    "ask_callback_contact_details", "confirm_callback_contact_details",
})
VISIT_REASON_QUESTIONS = frozenset({
    "ask_visit_reason", "ask_continue_visit_reason", "capture_tentative_booking_request",
})
# A visit reason this long says what the visit is about.
REASON_WORDS = 4
JUST_BOOKED = ("just made", "just booked", "just did", "the new one", "that one you")


class NavigationError(RuntimeError):
    """The graph could not be walked to an action; the engine falls back to static prompt mode."""


QUESTIONS = frozenset({
    "price_question", "hours_question", "address_question", "service_question",
    "practitioner_seniority_question", "payment_status_question",
})
SLOT_QUESTIONS = frozenset({"propose_initial_slot", "clarify_two_slot_choice"})
SIDE_ANSWERS = frozenset({"answer_pricing", "answer_service_info", "answer_hours"})
NAME_QUESTIONS = frozenset({
    "ask_first_name", "ask_last_name", "ask_shared_phone_full_name", "ask_caller_full_name",
})
BIRTH_DATE_QUESTIONS = frozenset({
    "ask_date_of_birth", "ask_shared_phone_dob", "reask_shared_phone_dob",
}) | ASK_CALLEE_BIRTH_DATE
# The caller's details read back before registering, and the question after a "no".
DETAILS_READBACK = frozenset({
    "confirm_new_patient_details", "ask_details_correction", "confirm_corrected_details",
})


@dataclass(frozen=True)
class Turn:
    """One caller turn as the navigator sees it."""

    text: str
    route: RouteDecision
    answer: Answer
    task_changed: bool = False  # this turn asked for something other than before
    at_start: bool = True  # the walk is still in the state the turn began in
    stuck: bool = False  # the walk would ask the same thing a third time in a row


@dataclass(frozen=True)
class Hop:
    previous: str
    next: str
    reason: str  # the exit taken


@dataclass
class NavDecision:
    """Where the turn landed and what the agent does there (same shape for every backend).

    With `pending_tool` set the walk stopped in a tool_call state: the engine runs the
    tool, then `resume`s the walk from there with what it returned.
    """

    state: str
    action: str
    route: RouteDecision
    hops: list[Hop] = field(default_factory=list)
    filler: str | None = None
    filler_said: bool = False  # already spoken while the navigator decided
    verify_audio: bool = False
    terminal: bool = False
    pending_tool: str | None = None
    turn: Turn | None = None


def _count(items: list[Any] | None) -> str:
    if items is None:
        return "unknown"
    return "none" if not items else "one" if len(items) == 1 else "many"


Predicate = Callable[[GraphSession, Turn], Any]

PREDICATES: dict[str, Predicate] = {
    "route": lambda s, t: t.route.route,
    "task": lambda s, t: s.task.value if s.task else None,
    "answer": lambda s, t: t.answer.value,
    "identified": lambda s, t: s.patient is not None,
    "phone_matches": lambda s, t: _count(s.phone_matches or []),
    "services_read": lambda s, t: s.services_read,
    "service_known": lambda s, t: s.appointment_type is not None,
    "days_known": lambda s, t: (s.days is not None or s.part_of_day is not None
                                or bool(s.not_weekdays)),
    "offered": lambda s, t: bool(s.last_offer),
    "slot_picked": lambda s, t: s.picked_slot is not None,
    "confirmed": lambda s, t: s.confirmation is not None,
    "bookings": lambda s, t: _count(s.upcoming),
    "targets": lambda s, t: _count(s.targets or []),
    "has_first_name": lambda s, t: bool(s.new_patient.first_name),
    "has_last_name": lambda s, t: bool(s.new_patient.last_name),
    "details_complete": lambda s, t: s.new_patient.complete,
    "details_confirmed": lambda s, t: s.confirmed(s.new_patient.subject),
    "details_disputed": lambda s, t: s.new_patient.disputed,
    "outcome": lambda s, t: s.outcome,
    "last_action": lambda s, t: s.last_action,
    "task_changed": lambda s, t: t.task_changed,
    "at_start": lambda s, t: t.at_start,
    "reminder_due": lambda s, t: s.reminder_due is not None,
    "memory_to_follow": lambda s, t: bool(s.memories) and not s.followed_up,
    "late_in_call": lambda s, t: time.monotonic() - s.started >= LATE_IN_CALL_S,
    "stuck": lambda s, t: t.stuck,
    "reason_given": lambda s, t: len((s.visit_reason or "").split()) >= REASON_WORDS,
    "location_named": lambda s, t: s.location is not None,
    "callback_number_given": lambda s, t: s.callback_phone is not None,
    "person_free": lambda s, t: s.can_put_through and bool(s.open_lines),
    "settled_new": lambda s, t: s.progressed,
    "record_differs": lambda s, t: s.record_differs,
    "time_changed": lambda s, t: s.time_wish_changed,
    "in_crisis": lambda s, t: s.in_crisis,
    "escalated": lambda s, t: s.crisis_escalated,
    "targets_just_booked": lambda s, t: bool(s.targets) and set(s.targets) <= {
        b.id for b in s.booked},
    # outbound calls (flows/callee.py)
    "outbound": lambda s, t: s.callee is not None,
    "outbound_kind": lambda s, t: s.callee.kind if s.callee is not None else None,
    "callee": lambda s, t: s.callee.status if s.callee is not None else "none",
    "callee_on_file": lambda s, t: s.callee is not None and s.callee.on_file,
    "callee_retry": lambda s, t: s.callee is not None and s.callee.misses > 0,
    "declined_as": lambda s, t: s.callee.declined_as if s.callee is not None else None,
    "slot_gone": lambda s, t: s.callee is not None and s.callee.slot_gone,
}


def holds(condition: dict[str, Any] | None, session: GraphSession, turn: Turn) -> bool:
    """Every predicate of the condition has its expected value (a list: any of them)."""
    if condition is None:
        return False
    for name, expected in condition.items():
        value = PREDICATES[name](session, turn)
        if isinstance(expected, list):
            if value not in expected:
                return False
        elif value != expected:
            return False
    return True


# Predicates with a fixed set of values: a condition naming another value could never
# hold (YAML reads a bare `no` as false: such a typo must fail at load, not mid-call).
PREDICATE_VALUES: dict[str, set[Any]] = {
    "answer": {a.value for a in Answer},
    "task": {t.value for t in TaskKind} | {None},
    "phone_matches": {"none", "one", "many"},
    "bookings": {"unknown", "none", "one", "many"},
    "targets": {"none", "one", "many"},
    "outcome": {"booked", "cancelled", "patient_created", "slots_offered", "handed_off",
                "confirmed", "corrected", "identified", "slot_gone"},
    "outbound_kind": {"callback", "scheduled", "waitlist_offer", "reminder", "checkin", None},
    "callee": {*CALLEE_STATUSES, "none"},
    "declined_as": {"wrong_number", "not_available", "no", None},
    **{name: {True, False} for name in (
        "identified", "services_read", "service_known", "days_known", "offered",
        "slot_picked", "confirmed", "has_first_name", "has_last_name", "details_complete",
        "details_confirmed", "details_disputed",
        "task_changed", "at_start", "reminder_due", "memory_to_follow", "late_in_call",
        "stuck", "reason_given", "location_named", "callback_number_given", "settled_new",
        "person_free",
        "record_differs", "targets_just_booked", "time_changed", "in_crisis", "escalated",
        "outbound", "callee_on_file", "callee_retry", "slot_gone",
    )},
}


def condition_problems(graph: ContextGraph) -> list[str]:
    """What in the graph's conditions this navigator cannot evaluate (empty: all of it)."""
    conditions: list[tuple[str, dict[str, Any]]] = []
    for name, state in graph.states.items():
        conditions += [(f"state {name!r} exit {e.name!r}", e.when) for e in state.exits if e.when]
        conditions += [(f"state {name!r} action {a!r}", c) for a, c in state.action_when.items()]
    conditions += [(f"global exit {e.name!r}", e.when) for e in graph.global_exits if e.when]
    problems = []
    for where, condition in conditions:
        for predicate, expected in condition.items():
            if predicate not in PREDICATES:
                problems.append(f"{where}: unknown predicate {predicate!r}")
                continue
            allowed = PREDICATE_VALUES.get(predicate)
            values = expected if isinstance(expected, list) else [expected]
            bad = [v for v in values if allowed is not None and v not in allowed]
            if bad:
                problems.append(f"{where}: {predicate} can never be {bad} (quote yes/no in YAML)")
    return problems


# --- (2) What the words settle ----------------------------------------------------------


def understand(session: GraphSession, turn: Turn, today: date) -> None:
    """Record in the session what this turn settles (never a write: that is the tools' job)."""
    before, wish = session.understood(), session.time_wish
    _understand(session, turn, today)
    session.progressed = session.understood() != before
    session.time_wish_changed = session.time_wish != wish


def _understand(session: GraphSession, turn: Turn, today: date) -> None:
    text, last = turn.text, session.last_action
    session.heard.append(text)
    if turn.route.route == CRISIS_ROUTE:
        session.in_crisis = True
    if turn.route.route in (RED_FLAG_ROUTE, CRISIS_ROUTE):
        session.red_flag = True
    if turn.route.task is not None:
        if turn.route.task is not session.task or session.task_quote is None:
            session.task_quote = text
        session.task = turn.route.task
    offer = [(ref, session.offered[ref]) for ref in session.last_offer]
    other = slot_choice(text, offer) if last in FINAL_READBACK else None
    if last in FINAL_READBACK and session.picked_slot is not None:
        if other is not None and other != session.picked_slot:
            session.picked_slot, session.confirmation = other, None  # "no, the other one"
        elif turn.answer is Answer.YES:
            session.confirmation = Confirmation(session.picked_slot, text)
        elif turn.answer is Answer.NO:
            session.picked_slot = None
            session.confirmation = None
    if last in CANCEL_READBACK and session.targets and turn.answer is Answer.YES:
        session.confirmation = Confirmation(cancel_subject(session.targets), text)
    if last in ATTENDANCE_READBACK and session.targets and turn.answer is Answer.YES:
        session.confirmation = Confirmation(attendance_subject(session.targets), text)
    _understand_requests(session, turn)
    if last == "deliver_reminder" and session.reminder_in_focus and turn.answer is Answer.YES:
        session.confirmation = Confirmation(reminder_subject(session.reminder_in_focus.id), text)
    if session.last_offer and last not in FINAL_READBACK:
        chosen = slot_choice(text, offer) or _any_will_do(text, offer, last, today)
        if chosen is not None:
            session.picked_slot = chosen
    if last in SIDE_ANSWERS and session.task is None and session.appointment_type is not None \
            and turn.answer is Answer.YES:  # "would you like to book one?" "yes"
        session.task = TaskKind.BOOK
    if last == "ask_preferred_time" and turn.answer is Answer.YES:
        session.days = flexible_days("any time", today)  # yes, whenever: the earliest
    if len(session.services) == 1 and session.appointment_type is None:
        session.appointment_type = session.services[0]  # one kind of visit: nothing to ask
    if session.services:
        mentioned = appointment_type(text, session.services)
        if mentioned is not None:
            session.appointment_type = mentioned
            # naming a service to a scheduling line is asking for one (unless asking about it)
            if session.task is None and turn.route.route not in QUESTIONS:
                session.task = TaskKind.BOOK
    _understand_identity(session, turn, today)
    understand_callee(session, text, turn.route.route, turn.answer, last, today)
    if last not in BIRTH_DATE_QUESTIONS | DETAILS_READBACK:  # not a day to come in
        session.days = (
            preferred_days(text, today) or flexible_days(text, today) or session.days
        )
        session.part_of_day = part_of_day(text) or session.part_of_day
        session.not_weekdays |= excluded_weekdays(text)
    session.practitioner = named(text, session.practitioners) or session.practitioner
    session.location = named(text, [loc.name for loc in session.locations]) or session.location
    understand_targets(session, turn)


def _any_will_do(text: str, offer: list[tuple[str, Slot]], last: str | None,
                 today: date) -> str | None:
    """Asked to choose, the caller says again the day they want, and every time offered is
    on it: the earliest, to be read back for their yes."""
    if last not in SLOT_QUESTIONS:
        return None
    days = preferred_days(text, today)
    if days is None or not all(days[0] <= slot.starts_at.date() <= days[1] for _, slot in offer):
        return None
    return offer[0][0]


def _understand_requests(session: GraphSession, turn: Turn) -> None:
    """What a visit is for, and what and where to call back: answers to the questions that
    ask for them, in the caller's words."""
    last, text = session.last_action, turn.text
    if last in VISIT_REASON_QUESTIONS and turn.answer is not Answer.NO:
        session.visit_reason = " ".join(filter(None, (session.visit_reason, text)))
    elif last == "ask_problem_duration":
        session.problem_duration = text
    elif last == "ask_callback_message" and turn.answer is not Answer.NO:
        session.callback_message = text
    elif last in CALLBACK_NUMBER_QUESTIONS:
        session.callback_phone = volunteered_phone(text, asked=True) or (
            None if turn.answer is Answer.NO else session.callback_phone)
    elif last == "clarify_returned_call_intent" and turn.answer is Answer.YES \
            and session.task is None:
        session.task = TaskKind.QUERY  # "we tried to reach you" "yes": about their bookings


def _understand_identity(session: GraphSession, turn: Turn, today: date) -> None:
    """Names, birth date and phone from the turn, asked for or volunteered; corrections
    (a spelled name, a new value after "no", one part of the date) replace what was heard."""
    last, details = session.last_action, session.new_patient
    before = (details.first_name, details.last_name, details.date_of_birth)
    asked_name = last in NAME_QUESTIONS or last in DETAILS_READBACK
    if last in NAME_QUESTIONS:
        names = answered_name(turn.text)
    elif last in DETAILS_READBACK:  # "no, Reid", "it's Jaime actually"; not "yes, dear"
        names = introduced_name(turn.text, asked=True) or short_name(turn.text)
    else:
        names = introduced_name(turn.text)
    if last == "ask_last_name" and names:
        details.last_name = names[-1]
    elif len(names) == 1 and details.first_name and last != "ask_first_name":
        _correct_name(details, names[0], last)
    elif names:
        details.first_name = names[0]
        if len(names) > 1:
            details.last_name = names[-1]
    if not asked_name:  # a spelled word corrects the name part it spells
        for word in spelled_words(turn.text):
            _correct_name(details, word, last)
    asked_date = last in BIRTH_DATE_QUESTIONS or last in DETAILS_READBACK
    born = volunteered_birth_date(turn.text, today, asked=asked_date)
    if born is None and last in DETAILS_READBACK and details.date_of_birth is not None:
        born = corrected_birth_date(turn.text, details.date_of_birth, today)
    details.date_of_birth = born or details.date_of_birth
    details.phone = volunteered_phone(turn.text) or details.phone
    changed = (details.first_name, details.last_name, details.date_of_birth) != before
    if last in DETAILS_READBACK:
        if turn.answer is Answer.YES and not changed and details.complete:
            session.confirmation = Confirmation(details.subject, turn.text)
        details.disputed = turn.answer is Answer.NO and not changed
    elif changed:
        details.disputed = False
    _identify_on_shared_phone(session)


def _correct_name(details: NewPatientDetails, word: str, last: str | None) -> None:
    """One name word said again (or spelled): it replaces the part it is most like."""
    if last == "ask_first_name" or (last != "ask_last_name" and closer_to_first(
            word, details.first_name, details.last_name)):
        details.first_name = word
    else:
        details.last_name = word


def _identify_on_shared_phone(session: GraphSession) -> None:
    details = session.new_patient
    if session.patient is None and len(session.phone_matches) > 1:
        matches = [
            p for p in session.phone_matches
            if (details.first_name is None or p.first_name.lower() == details.first_name.lower())
            and (details.date_of_birth is None or p.date_of_birth == details.date_of_birth)
        ]
        # a name alone is not enough on a shared phone: the date of birth must match too
        if len(matches) == 1 and details.date_of_birth is not None:
            session.patient = matches[0]


def understand_targets(session: GraphSession, turn: Turn) -> None:
    """Which booking(s) a cancel or reschedule is about (again once bookings are loaded)."""
    if session.task not in (TaskKind.CANCEL, TaskKind.RESCHEDULE, TaskKind.CONFIRM) \
            or not session.upcoming:
        return
    just_booked = [b.id for b in session.booked if b.id in session.loaded_ids]
    if just_booked and any(words in turn.text.lower() for words in JUST_BOOKED):
        session.targets = just_booked[-1:]
        return
    if turn.route.route == "cancel_all_request":
        session.targets = [a.id for a in session.upcoming]
        return
    if len(session.upcoming) == 1:
        session.targets = [session.upcoming[0].id]
    else:
        chosen = slot_choice(turn.text, [(a.id, a) for a in session.upcoming])
        kind = named(turn.text, sorted({a.type_name for a in session.upcoming}))
        of_kind = [a.id for a in session.upcoming if a.type_name == kind]
        if chosen is None and len(of_kind) == 1:  # "the blood test"
            chosen = of_kind[0]
        if chosen is not None:
            session.targets = [chosen]
    if session.task is TaskKind.RESCHEDULE and len(session.targets) == 1:
        moving = next(a for a in session.upcoming if a.id == session.targets[0])
        session.appointment_type = next(  # the new time is for the same kind of visit
            (t for t in session.services if t.name == moving.type_name), session.appointment_type
        )


# --- (3) The walk ------------------------------------------------------------------------


def read_turn(session: GraphSession, text: str) -> Turn:
    """The caller's words routed (with the agent's last action as evidence), before they
    change the session: both navigator backends start every turn here. A turn asking for
    two things is taken one at a time: the first now, the rest once it is done."""
    route = route_turn(text, session.last_action)
    if route.task is not None:  # a new request of their own replaces any still waiting
        session.pending_requests.clear()
    if route.route not in (RED_FLAG_ROUTE, CRISIS_ROUTE):
        first, *later = requests_in_order(
            text, session.last_action, lambda part: appointment_type(part, session.services))
        if later:
            session.pending_requests[:0] = later
            text, route = first, route_turn(first, session.last_action)
    changed = route.task is not None and route.task is not session.task
    return Turn(text, route, classify_answer(text), task_changed=changed)


def navigate(
    graph: ContextGraph, session: GraphSession, state: str, text: str, today: date
) -> NavDecision:
    """One caller turn, deterministically: understand it, then walk to an action."""
    turn = read_turn(session, text)
    understand(session, turn, today)
    return walk(graph, session, state, turn)


# Speaks a filler phrase at once, while the navigator is still deciding.
FillerSink = Callable[[str], Awaitable[None]]


class Navigator(Protocol):
    """A navigator backend: the deterministic rules or a fast model, same decisions."""

    async def navigate(
        self, session: GraphSession, state: str, text: str, today: date, *,
        filler: FillerSink | None = None,
    ) -> NavDecision:
        """One caller turn from `state` to an action (or a tool_call state's pending tool)."""

    async def resume(self, session: GraphSession, state: str, turn: Turn) -> NavDecision:
        """On from a tool_call state whose tool has just run."""


@dataclass
class DeterministicNavigator:
    """The router rules and understanding above: microseconds a turn, no fillers needed."""

    graph: ContextGraph

    async def navigate(
        self, session: GraphSession, state: str, text: str, today: date, *,
        filler: FillerSink | None = None,
    ) -> NavDecision:
        return navigate(self.graph, session, state, text, today)

    async def resume(self, session: GraphSession, state: str, turn: Turn) -> NavDecision:
        return walk(self.graph, session, state, turn, tool_done=True)


def walk(
    graph: ContextGraph, session: GraphSession, state: str, turn: Turn, *,
    tool_done: bool = False,
) -> NavDecision:
    """From `state` to an action (or to a tool_call state whose tool must run first)."""
    hops: list[Hop] = []
    visited = {state}
    start = state
    returned = False  # the walk may come back to where the turn began once (a pivot)
    while len(hops) < MAX_HOPS:
        spec = graph.states[state]
        if spec.type is StateType.TOOL_CALL and not (tool_done and state == start):
            return NavDecision(
                state=state, action="", route=turn.route, hops=hops, pending_tool=spec.tool,
                turn=turn,
            )
        reopen = set() if returned else {start}
        here = replace(turn, at_start=not hops)
        chosen = next(
            (e for e in graph.exits_of(state) if holds(e.when, session, here)
             and _target(graph, session, state, e.to) not in visited - reopen
             and may_enter(graph, session, state, e.to)),
            None,
        )
        if chosen is None and spec.type is not StateType.ACTION:
            # passed through: the first exit is the default (the first that may be entered)
            chosen = next((e for e in spec.exits if may_enter(graph, session, state, e.to)),
                          None)
            if chosen is None or _target(graph, session, state, chosen.to) in visited:
                raise NavigationError(f"state {state!r}: every way on was already taken")
        if chosen is None:
            break
        target = take_exit(graph, session, state, chosen.to)
        hops.append(Hop(state, target, chosen.name))
        returned = returned or target == start
        visited.add(target)
        state = target
    spec = graph.states[state]
    if spec.type is not StateType.ACTION:
        raise NavigationError(f"no action state within {MAX_HOPS} hops (stopped in {state!r})")
    action = choose_action(graph, state, session, turn)
    if _asked_too_often(graph, session, action, state) and not turn.stuck:
        exit_ = next(e for e in graph.global_exits if e.name == STUCK_EXIT)
        target = take_exit(graph, session, state, exit_.to)
        hops.append(Hop(state, target, exit_.name))
        after = walk(graph, session, target, replace(turn, stuck=True))
        after.hops[:0] = hops
        return after
    took_action(session, action)
    return NavDecision(
        state=state, action=action, route=turn.route, hops=hops,
        filler=graph.actions[action].filler, terminal=spec.is_terminal, turn=turn,
    )


def choose_action(graph: ContextGraph, state: str, session: GraphSession, turn: Turn) -> str:
    """The action state's first action whose `action_when` holds, else its first
    unconditional one."""
    spec = graph.states[state]
    conditional = [a for a in spec.actions if a in spec.action_when]
    return next(
        (a for a in conditional if holds(spec.action_when[a], session, turn)),
        next((a for a in spec.actions if a not in spec.action_when), spec.actions[0]),
    )


def opening(graph: ContextGraph, session: GraphSession) -> NavDecision:
    """Where the call starts speaking, before anyone has: the initial state's first exit,
    on through states nobody speaks in (by their conditions on what the call knows), to
    the first action state and its action. Its exits wait for the first turn."""
    turn = Turn("", NEUTRAL, Answer.UNCLEAR)
    state = graph.initial_state
    exit_ = graph.states[graph.entry_state(state)].exits[0]
    hops: list[Hop] = []
    for _ in range(MAX_HOPS):
        target = take_exit(graph, session, state, exit_.to)
        hops.append(Hop(state, target, exit_.name))
        state = target
        spec = graph.states[state]
        if spec.type is StateType.ACTION:
            action = choose_action(graph, state, session, turn)
            took_action(session, action)
            return NavDecision(state=state, action=action, route=NEUTRAL, hops=hops,
                               terminal=spec.is_terminal, turn=turn)
        ways = [e for e in spec.exits if may_enter(graph, session, state, e.to)]
        exit_ = next((e for e in ways if holds(e.when, session, turn)), ways[0] if ways else None)
        if exit_ is None:
            break
    raise NavigationError(f"no action state to open the call with (stopped in {state!r})")


def _asked_too_often(graph: ContextGraph, session: GraphSession, action: str,
                     state: str) -> bool:
    """Saying `action` now would repeat it past the limit (graphs with a `stuck` exit the
    call may take from here)."""
    repeated = (action == session.last_action and not session.progressed
                and session.asked_in_a_row >= MAX_SAME_QUESTION)
    looping = session.asked_since_outcome.get(action, 0) >= MAX_ASKED_BETWEEN_OUTCOMES
    return (repeated or looping) and any(
        e.name == STUCK_EXIT and may_enter(graph, session, state, e.to)
        for e in graph.global_exits)


def took_action(session: GraphSession, action: str) -> None:
    """The agent is about to do `action`: what it is about becomes the call's focus."""
    again = action == session.last_action and not session.progressed
    session.asked_in_a_row = session.asked_in_a_row + 1 if again else 1
    session.asked_since_outcome[action] = session.asked_since_outcome.get(action, 0) + 1
    session.last_action = action
    if action == "deliver_reminder":
        session.reminder_in_focus = session.reminder_due
        if session.reminder_in_focus is not None:
            session.delivered.append(session.reminder_in_focus.id)
    elif action == "follow_up_on_memory":
        session.followed_up = True


def take_exit(graph: ContextGraph, session: GraphSession, state: str, to: str) -> str:
    """The state an exit lands in; entering or leaving a side-loop keeps its return stack."""
    target = _target(graph, session, state, to)
    if to == RETURN and session.return_to:
        session.return_to.pop()
    elif graph.in_side_loop(target) and not graph.in_side_loop(state):
        session.return_to.append(state)
    return target


def may_enter(graph: ContextGraph, session: GraphSession, state: str, to: str) -> bool:
    """The state an exit from `state` lands in passes the guards it requires."""
    return entry_refused(graph, _target(graph, session, state, to), session) is None


def _target(graph: ContextGraph, session: GraphSession, state: str, to: str) -> str:
    if to == RETURN:  # back where the side-loop began (the start, if that is unknown)
        origin = session.return_to[-1] if session.return_to else graph.initial_state
        return graph.entry_state(origin)
    return graph.entry_state(to)


NEUTRAL = RouteDecision("none", NO_ROUTE.confidence, ())


def settle(graph: ContextGraph, session: GraphSession, state: str) -> NavDecision | None:
    """After an action's write: follow the exit its outcome opens (booked → wrap-up, ...).

    Only an exit that names the `outcome` is taken from `state`, so nothing the caller
    said this turn is acted on twice; from there the walk continues on session facts
    alone, to the next action the agent says in the same reply. None: the outcome opens
    no exit (the state stays). The outcome is consumed either way.
    """
    turn = Turn("", NEUTRAL, Answer.UNCLEAR)
    chosen = None
    if session.outcome is not None:
        session.asked_since_outcome.clear()  # something got done: a fresh count
        session.progressed = False  # what the turn settled is used up by the write
        chosen = next(
            (e for e in graph.exits_of(state)
             if e.when and "outcome" in e.when and holds(e.when, session, turn)
             and may_enter(graph, session, state, e.to)),
            None,
        )
    session.outcome = None
    if chosen is None:
        return None
    target = take_exit(graph, session, state, chosen.to)
    decision = walk(graph, session, target, turn)
    decision.hops.insert(0, Hop(state, target, chosen.name))
    return decision


def warm_up() -> None:
    """Load the router rules (with the red flags and the farewell rules they consult), the
    words of names and times, and the date parser now (start-up), not on a caller's turn."""
    route_turn("okay, that's all, goodbye")
    date_of_birth("march 14 1948", date(2000, 1, 1))
    answered_name("my name is Sam Nair")
    warm_up_time_words()
