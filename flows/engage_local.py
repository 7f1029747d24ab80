"""Engage without an LLM: each deterministic action runs its tool, then says its line.

The lines are data (`prompts/actions.yaml`), filled from the session; a tool that
refuses or fails is said honestly (its `outcomes` lines), never papered over. This is
what `make run` with no keys answers callers with, and what the tests drive.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, model_validator

from db.scheduling import Appointment
from db.slots import Slot
from flows.graph import ContextGraph
from flows.graph_session import GraphSession
from flows.graph_tools import PROMISE_TOOLS, GraphTools, ToolResult
from flows.post_booking_tools import TOOLS as POST_BOOKING_TOOLS
from flows.same_day import recaps
from language.spoken import say_date, say_list, say_phone, say_price, say_time
from lib.prompts import PROMPTS_DIR

LINES_FILE = PROMPTS_DIR / "actions.yaml"
FIELDS = frozenset({
    "clinic", "name", "service", "slots", "slot", "result", "bookings", "targets", "price",
    "prices",
    "hours", "service_info", "emergency_number", "memory", "reminder", "summary",
    "full_name", "birth_date", "service_names", "locations", "next_step", "callback_number",
    "lookup_result", "callee", "call_reason", "reminder_appointment", "call_us", "call_time",
})
# Fields a line may be said without (a caller the clinic has no record of has no name):
# an empty one goes with the words that join it to the line ("Thank you, {name}." →
# "Thank you."), so no line is ever said with an empty slot.
OPTIONAL_FIELDS = frozenset({"name"})
_JOINED = {field: re.compile(rf"(?:,\s*|\s+)\{{{field}\}}") for field in OPTIONAL_FIELDS}
NEXT_STEPS = frozenset({"carry_on", "offer_booking", "anything_else"})
OUTCOMES = frozenset({"no_slots", "blocked", "not_reached", "system_down", "system_slow",
                      "slot_taken",
                      "slot_taken_none", "slot_gone", "callback_failed",
                      "emergency_callback_failed", "crisis_callback_failed"})
# When the call from the team an action promises was not arranged: what it says instead.
CALL_NOT_ARRANGED = {"red_flag_emergency_redirect": "emergency_callback_failed",
                     "crisis_support_first": "crisis_callback_failed"}


class ActionLines(BaseModel):
    actions: dict[str, str]
    rephrased: dict[str, str] = {}  # the second time in a row, said this way instead
    next_steps: dict[str, str]
    lookups: dict[str, str]
    outcomes: dict[str, str]
    clinic_numbers: dict[str, str]  # known ({clinic_number}) / unknown: the field `call_us`
    welcome_back: str  # fields: name, earlier_today

    @model_validator(mode="after")
    def _fields_are_known(self) -> ActionLines:
        problems = [f"rephrased {name}: not an action" for name in self.rephrased
                    if name not in self.actions]
        lines = {**self.actions, **{f"rephrased {k}": v for k, v in self.rephrased.items()},
                 **self.outcomes}
        for name, line in lines.items():
            used = {field for _, field, _, _ in string.Formatter().parse(line) if field}
            if used - FIELDS:
                problems.append(f"{name}: unknown fields {sorted(used - FIELDS)}")
        if set(self.outcomes) != OUTCOMES:
            problems.append(f"outcomes must be exactly {sorted(OUTCOMES)}")
        if set(self.next_steps) != NEXT_STEPS:
            problems.append(f"next_steps must be exactly {sorted(NEXT_STEPS)}")
        if set(self.lookups) != {"found", "not_found"}:
            problems.append("lookups must be exactly found and not_found")
        welcome = {field for _, field, _, _ in string.Formatter().parse(self.welcome_back)
                   if field}
        if welcome != {"name", "earlier_today"}:
            problems.append("welcome_back must say exactly {name} and {earlier_today}")
        if set(self.clinic_numbers) != {"known", "unknown"}:
            problems.append("clinic_numbers must be exactly known and unknown")
        if problems:
            raise ValueError("; ".join(problems))
        return self


@lru_cache(maxsize=1)
def action_lines(path: Path = LINES_FILE) -> ActionLines:
    return ActionLines.model_validate(yaml.safe_load(path.read_text()))


def fill(line: str, fields: Mapping[str, str]) -> str:
    """The line with its fields filled; an empty optional field leaves no gap."""
    for field, joined in _JOINED.items():
        if not fields.get(field):
            line = joined.sub("", line)
    return line.format_map(fields)


def missing_lines(graph: ContextGraph, lines: ActionLines | None = None) -> list[str]:
    """Actions of the graph with nothing to say offline (empty: the graph runs with no LLM)."""
    lines = lines or action_lines()
    return sorted(set(graph.actions) - set(lines.actions))


# --- Which tool an action runs -------------------------------------------------------

ToolCall = tuple[str, dict[str, Any]]


# A check-in turn this long says something worth remembering next time.
DETAIL_MIN_WORDS = 5


def _reminder_ref(session: GraphSession) -> str:
    focus = session.reminder_in_focus
    return next((ref for ref, r in session.reminder_refs.items() if focus and r.id == focus.id), "")


def _ref_of(session: GraphSession, appointment_id: str) -> str:
    return next((ref for ref, a in session.appointment_refs.items() if a.id == appointment_id), "")


ACTION_TOOLS: dict[str, Callable[[GraphSession, str], ToolCall | None]] = {
    "propose_initial_slot": lambda s, said: ("CheckAvailability", {}),
    "book_confirmed_selected_slot": lambda s, said: (
        "CreateAppointment", {"slot_ref": s.picked_slot}),
    "reschedule_confirmed_selected_slot": lambda s, said: ("RescheduleAppointment", {
        "slot_ref": s.picked_slot,
        "appointment_ref": _ref_of(s, s.targets[0]) if s.targets else "",
    }),
    # the intent gate's quote: the caller's words that asked for the cancellation
    "cancel_confirmed_current_booking": lambda s, said: ("CancelAppt", {
        "appointment_ref": _ref_of(s, s.targets[0]) if s.targets else "",
        "user_quote": s.task_quote or said}),
    "cancel_confirmed_all_current_bookings": lambda s, said: ("CancelAppointments", {
        "appointment_refs": [_ref_of(s, t) for t in s.targets],
        "user_quote": s.task_quote or said}),
    "correct_registered_details": lambda s, said: ("UpdatePatient", {
        "patient_ref": "P1", "first_name": s.new_patient.first_name,
        "last_name": s.new_patient.last_name,
        "date_of_birth": s.new_patient.date_of_birth.isoformat()
        if s.new_patient.date_of_birth else None}),
    "look_up_caller_record": lambda s, said: ("GetPatientDetails", {
        "first_name": s.new_patient.first_name, "last_name": s.new_patient.last_name,
        "date_of_birth": s.new_patient.date_of_birth.isoformat()
        if s.new_patient.date_of_birth else None}),
    "register_new_patient": lambda s, said: ("CreatePatient", {
        "first_name": s.new_patient.first_name, "last_name": s.new_patient.last_name,
        "date_of_birth": s.new_patient.date_of_birth.isoformat()
        if s.new_patient.date_of_birth else None,
        **({"phone": s.new_patient.phone} if s.new_patient.phone else {}),
    }),
    "human_callback_requested": lambda s, said: ("EscalateToHuman", {
        "reason": "caller asked for a callback", "message": s.callback_message or said}),
    "sales_callback_requested": lambda s, said: ("EscalateToHuman", {
        "reason": "returning a call about the clinic's services", "message": said}),
    "mark_appointment_confirmed": lambda s, said: ("ConfirmAppointment", {
        "appointment_ref": _ref_of(s, s.targets[0]) if s.targets else ""}),
    "crisis_support_first": lambda s, said: ("EscalateToHuman", {
        "reason": "caller in crisis", "message": said, "urgent": True, "stay": True}),
    "red_flag_emergency_redirect": lambda s, said: (
        "EscalateToHuman", {"reason": "possible emergency", "message": said, "urgent": True}),
    "answer_pricing": lambda s, said: ("GetServicesAndPricing", {}),
    "ask_service": lambda s, said: ("GetServicesAndPricing", {}),
    "answer_service_info": lambda s, said: ("GetAppointmentTypes", {}),
    # hours, open now, a day (closures included) or an address: from the caller's words
    "answer_hours": lambda s, said: ("GetLocationInfo", {"question": said}),
    "answer_payment_status": lambda s, said: ("CheckPaymentStatus", {}),
    "transfer_confirmed": lambda s, said: ("TransferCall", {}),
    "put_through_to_person": lambda s, said: ("TransferToPerson", {"location": said}),
    # companion check-in calls: the person's own words are what is worth remembering
    "listen_and_reflect": lambda s, said: (
        ("save_important_detail", {"detail": said})
        if len(said.split()) >= DETAIL_MIN_WORDS else None),
    "acknowledge_reminder": lambda s, said: ("mark_reminder_acknowledged", {
        "reminder_ref": _reminder_ref(s)}),
}


@dataclass
class Engaged:
    text: str
    tool: ToolResult | None = None


async def engage(
    action: str, state: str, session: GraphSession, tools: GraphTools, *, caller_text: str,
    clinic: str, emergency_number: str, clinic_number: str | None = None,
) -> Engaged:
    """Run the action's tool (if any) in `state`, then say its line or what went wrong.
    `clinic_number`: the clinic's own number on this call, for "you can reach us on ..."."""
    lines = action_lines()
    result: ToolResult | None = None
    planned = ACTION_TOOLS.get(action)
    call = planned(session, caller_text) if planned else None
    if call is not None and not _rereads_offer(tools.graph, state, call[0]) and not (
            _known_without_asking(tools.graph, state, call[0])):
        result = await tools.call(state, call[0], call[1])
    fields = _fields(session, tools, result, clinic, emergency_number)
    if action == "answer_hours":  # said from the clinic's data, whether or not the tool ran
        fields["hours"] = tools.calendar_answer(caller_text)
    fields["next_step"] = lines.next_steps[_next_step(session)]
    found = "found" if session.patient is not None else "not_found"
    fields["lookup_result"] = fill(lines.lookups[found], fields)
    fields["call_us"] = (lines.clinic_numbers["known"].format(clinic_number=say_phone(clinic_number))
                         if clinic_number else lines.clinic_numbers["unknown"])
    if result is not None and not result.ok:
        outcome = (_call_not_arranged(action) if call and call[0] in PROMISE_TOOLS
                   else "not_reached" if call and call[0] in POST_BOOKING_TOOLS
                   and result.error_class == "other" else _failure(result, session))
        return Engaged(fill(lines.outcomes[outcome], fields), result)
    if action == "propose_initial_slot" and not session.last_offer:
        return Engaged(fill(lines.outcomes["no_slots"], fields), result)
    line = line_for(action, session, lines)
    if "{call_time}" in line and not session.call_time:  # no call arranged: never promised
        line = lines.outcomes[_call_not_arranged(action)]
    return Engaged(fill(line, fields), result)


def welcome_back(session: GraphSession, lines: ActionLines | None = None) -> str:
    """What the first reply of a call begins with: what an identified caller did on their
    calls earlier today (empty for anyone else, and after the first reply)."""
    first, session.welcomed_back = not session.welcomed_back, True
    earlier = recaps(session) if first and session.patient is not None else []
    if not earlier:
        return ""
    line = (lines or action_lines()).welcome_back
    return line.format(name=session.patient.first_name, earlier_today=say_list(earlier))


def _call_not_arranged(action: str) -> str:
    """The outcome line for a call from the team that was not arranged."""
    return CALL_NOT_ARRANGED.get(action, "callback_failed")


def _failure(result: ToolResult, session: GraphSession) -> str:
    """Which outcome line says why the tool did not do its job."""
    if result.error_class == "guard":
        return "blocked"
    if result.error_class == "timeout":  # the write may have gone through: the team checks
        return "system_slow"
    if result.error_class == "conflict":  # the tool offered the next free slot, if any
        if session.callee is not None and session.callee.slot_gone:
            return "slot_gone"  # a waitlist offer someone else said yes to first
        return "slot_taken" if session.picked_slot else "slot_taken_none"
    return "system_down"


def _next_step(session: GraphSession) -> str:
    """After a side question: carry on with the task, or offer to book what they asked about."""
    if session.task is not None:
        return "carry_on"
    return "offer_booking" if session.appointment_type is not None else "anything_else"


def line_for(action: str, session: GraphSession, lines: ActionLines) -> str:
    """The action's line; said again right after itself, its rephrasing (if it has one)."""
    again = session.last_action == action and session.asked_in_a_row % 2 == 0
    return lines.rephrased.get(action, lines.actions[action]) if again else lines.actions[action]


def _rereads_offer(graph: ContextGraph, state: str, tool: str) -> bool:
    """Offering again where searching is not allowed reads the slots already found."""
    return tool == "CheckAvailability" and tool not in graph.state_tools[state]


def _known_without_asking(graph: ContextGraph, state: str, tool: str) -> bool:
    """The calendar is in what the call loaded: a graph whose state does not offer its
    tool (one stored before the tool existed) still answers, without the tool call."""
    return tool == "GetLocationInfo" and tool not in graph.state_tools[state]


def _fields(
    session: GraphSession, tools: GraphTools, result: ToolResult | None, clinic: str,
    emergency_number: str,
) -> dict[str, str]:
    kind = session.appointment_type
    targets = [a for a in session.upcoming or [] if a.id in session.targets]
    name = (session.patient.first_name if session.patient else session.new_patient.first_name)
    picked = session.offered.get(session.picked_slot or "")
    prices = say_list([
        f"{_lower_first(t.name)} at {say_price(t.price_cents, t.currency)}"
        for t in session.services
    ])
    return {
        "clinic": clinic,
        "name": name or "",
        "service": f"{_article(kind.name)} {_lower_first(kind.name)}" if kind else "an appointment",
        "slots": say_list([_slot(session.offered[r]) for r in session.last_offer], "or"),
        "slot": _slot(picked, with_place=True) if picked else "",
        "result": result.text if result else "",
        "bookings": (say_list([_booking(a) for a in session.upcoming or []])
                     or "no upcoming appointments"),
        "targets": say_list([_booking(a) for a in targets]),
        "prices": prices,
        "price": (f"{_article(kind.name).title()} {_lower_first(kind.name)} is "
                  f"{say_price(kind.price_cents, kind.currency)}"
                  if kind else prices[:1].upper() + prices[1:]),
        "hours": tools.opening_hours(),  # the week's, unless a question asked otherwise
        "service_info": (kind.description if kind else
                         " ".join(f"{t.name}: {t.description}" for t in session.services)),
        "emergency_number": emergency_number,
        "memory": session.memories[0].text.rstrip(".") + "." if session.memories else "",
        "reminder": _lower_first(session.reminder_in_focus.text.rstrip("."))
        if session.reminder_in_focus else "",
        "summary": _check_in_summary(session),
        "callback_number": say_phone(session.callback_phone or session.caller_number or ""),
        "call_time": session.call_time or "",
        "service_names": say_list([_lower_first(t.name) for t in session.services], "or"),
        "locations": say_list([loc.name for loc in session.locations], "or"),
        "full_name": " ".join(n for n in (session.new_patient.first_name,
                                          session.new_patient.last_name) if n),
        "birth_date": say_date(session.new_patient.date_of_birth)
        if session.new_patient.date_of_birth else "",
        **_callee_fields(session),
    }


def _callee_fields(session: GraphSession) -> dict[str, str]:
    """An outbound call's fields: the first name to ask for, and (once the person is
    confirmed as the patient, never before) why the clinic calls."""
    callee = session.callee
    if callee is None:
        return {"callee": "", "call_reason": "", "reminder_appointment": ""}
    confirmed = callee.confirmed
    booking = callee.appointment if confirmed else None
    return {
        "callee": callee.first_name,
        "call_reason": callee.reason if confirmed else "",
        "reminder_appointment": (
            f"{_lower_first(booking.type_name)} with {booking.practitioner_name} at our "
            f"{booking.location_name} clinic on {say_time(booking.local_start)}"
            if booking is not None else ""),
    }


def _check_in_summary(session: GraphSession) -> str:
    """What this check-in settled, said back in one sentence (empty if nothing)."""
    parts = [f"your reminder to {_lower_first(r.text.rstrip('.'))} is done"
             for r in session.acknowledged]
    if session.noted:
        parts.append("I've made a note of what you told me for next time")
    if not parts:
        return ""
    sentence = say_list(parts)
    return sentence[:1].upper() + sentence[1:] + "."


def _slot(slot: Slot, with_place: bool = False) -> str:
    where = f" at our {slot.location_name} clinic" if with_place else ""
    return f"{say_time(slot.starts_at)} with {slot.practitioner_name}{where}"


def _booking(appointment: Appointment) -> str:
    return (f"{_article(appointment.type_name)} {_lower_first(appointment.type_name)} with "
            f"{appointment.practitioner_name} on {say_time(appointment.local_start)}")


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
