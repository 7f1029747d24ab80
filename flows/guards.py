"""Tool guards: what must hold before a write runs, as plain checks.

A guard returns None when the call may proceed, or the reason it may not. A blocked
call is not an error: the tool answers the LLM "blocked: <reason>" and the tool-call
record classifies it `guard`. The graph names the guards each tool needs; a graph that
names an unknown guard does not load (`unknown_guards`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from flows.graph import ContextGraph, visible_tools
from flows.graph_session import (
    GraphSession,
    attendance_subject,
    cancel_subject,
    patient_subject,
    reminder_subject,
)
from language.fields import parse_date
from processors.world.write_safety import QUOTE_RECENT_TURNS, quote_problem

Guard = Callable[[GraphSession, Mapping[str, Any]], str | None]


def slot_from_availability(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if args.get("slot_ref") not in session.offered:
        return "that time did not come from an availability search on this call"
    return None


def caller_confirmed_slot(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if not session.confirmed(str(args.get("slot_ref"))):
        return "the caller has not explicitly confirmed this exact time"
    return None


def identified_patient(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if session.patient is None:
        return "the caller is not identified as a patient yet"
    return None


def appointment_was_loaded(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if session.patient is None or args.get("appointment_id") not in session.loaded_ids:
        return "that appointment was not returned by the booked-appointments lookup"
    return None


def appointments_were_loaded(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if session.patient is None or not session.loaded_ids:
        return "the caller's appointments have not been looked up"
    return None


def caller_confirmed_cancel(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    ids = args.get("appointment_ids") or [args.get("appointment_id")]
    if not session.confirmed(cancel_subject([str(i) for i in ids if i])):
        return "the caller has not explicitly confirmed cancelling exactly this"
    return None


def name_and_dob_given(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if not (args.get("first_name") and args.get("last_name") and args.get("date_of_birth")):
        return "first name, last name and date of birth are all needed"
    return None


def caller_confirmed_details(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    """Registering someone, or correcting the name or birth date they registered with,
    needs their yes to exactly the details read back."""
    patient = session.patient
    born = parse_date(args.get("date_of_birth"), date.today())
    first, last = (str(args.get(k) or "").strip() for k in ("first_name", "last_name"))
    if patient is not None:  # the identified caller: only a change of identity needs a yes
        first, last = first or patient.first_name, last or patient.last_name
        born = born or patient.date_of_birth
        if (first.lower(), last.lower(), born) == (
                patient.first_name.lower(), patient.last_name.lower(), patient.date_of_birth):
            return None
    if not session.confirmed(patient_subject(first, last, born)):
        return "the caller has not confirmed this name and date of birth when read back"
    return None


def caller_confirmed_attendance(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if not session.confirmed(attendance_subject([str(args.get("appointment_id"))])):
        return "the caller has not said yes to confirming exactly this booking"
    return None


def destination_configured(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    # The tool resolves the number itself from configuration or the location record;
    # this guard only refuses a number the model supplied.
    if args.get("phone_number"):
        return "transfer numbers come from the clinic's records, never from the conversation"
    return None


def person_confirmed(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    if not session.confirmed(reminder_subject(str(args.get("reminder_id")))):
        return "the person has not said they did exactly this"
    return None


def right_person_confirmed(session: GraphSession, args: Mapping[str, Any]) -> str | None:
    """On an outbound call nothing about the patient's care is said or done until the
    person on the line is confirmed as the patient (a call the caller made: always)."""
    if session.callee is not None and not session.callee.confirmed:
        return "the person on the line has not been confirmed as the patient"
    return None


def callee_asked_not_to_be_called(session: GraphSession, args: Mapping[str, Any]
                                  ) -> str | None:
    if session.callee is None:
        return "only an outbound call records a request not to be called"
    if not session.callee.opt_out_words:
        return "the person has not asked not to be called again"
    return None


GUARDS: dict[str, Guard] = {
    guard.__name__: guard
    for guard in (
        slot_from_availability, caller_confirmed_slot, identified_patient,
        appointment_was_loaded, appointments_were_loaded, caller_confirmed_cancel,
        name_and_dob_given, caller_confirmed_details, caller_confirmed_attendance,
        destination_configured, person_confirmed, right_person_confirmed,
        callee_asked_not_to_be_called,
    )
}


def unknown_guards(graph: ContextGraph) -> list[str]:
    """Guards the graph names (on tools, and states' requirements) that this engine does
    not have (empty: all known)."""
    named = {g for spec in graph.tools.values() for g in spec.guards}
    named |= {g for spec in graph.states.values() for g in spec.requires}
    named |= {g for spec in graph.super_states.values() for g in spec.requires}
    return sorted(named - set(GUARDS))


def entry_refused(graph: ContextGraph, state: str, session: GraphSession) -> str | None:
    """Why no navigator may enter `state` now (None: it may): its required guards."""
    for name in graph.state_requires.get(state, ()):
        reason = GUARDS[name](session, {})
        if reason is not None:
            return reason
    return None


def check(
    graph: ContextGraph, state: str, tool: str, session: GraphSession, args: Mapping[str, Any]
) -> str | None:
    """Why `tool` may not run now (None: it may): the state's gate, the caller's mode
    (unidentified callers are offered no writes but creating their record), the intent
    gate, then the tool's guards."""
    if tool not in graph.state_tools.get(state, frozenset()):
        return f"{tool} is not available while {state.replace('_', ' ')}"
    if tool not in visible_tools(graph, state, identified=session.patient is not None):
        return f"the caller is not identified yet, so {tool} is not offered"
    if graph.tools[tool].intent_gate:
        problem = quote_problem(args.get("user_quote"),
                                session.recent_caller_turns(QUOTE_RECENT_TURNS))
        if problem is not None:
            return problem
    for name in graph.tools[tool].guards:
        reason = GUARDS[name](session, args)
        if reason is not None:
            return reason
    return None
