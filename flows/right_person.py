"""The right-person check of an outbound call, and a callee's "please don't call me again".

Understood from the callee's words by rules, like everything else a turn settles
(flows/navigator.py calls this): their answer to "may I speak with ...?", then their
date of birth against the record. Only a match makes them the call's identified
patient; then what the call is about (the reminder's appointment, the offered slot,
their bookings) is handed to the session, and not before.
"""

from __future__ import annotations

from datetime import date

from flows.callee import Callee
from flows.graph_session import GraphSession
from flows.router import TaskKind
from language.affirmation import Answer
from language.caller_identity import introduced_name, volunteered_birth_date

# What the agent asks at each step of the check (the graph's actions).
ASK_FOR_CALLEE = frozenset({"ask_for_callee", "ask_for_requester"})
ASK_CALLEE_BIRTH_DATE = frozenset({"ask_callee_birth_date", "reask_callee_birth_date"})
# Routes (flows/data/router_rules.yaml) of the answers to "may I speak with ...?".
SPEAKING, WRONG_NUMBER, NOT_AVAILABLE = "callee_speaking", "wrong_number", "callee_unavailable"
DO_NOT_CALL = "do_not_call"
# Routes that answer nothing about who is on the line: they are not a failed try.
ASIDES = frozenset({DO_NOT_CALL, "red_flag", "crisis", "closing"})


def understand_callee(session: GraphSession, text: str, route: str, answer: Answer,
                      last_action: str | None, today: date) -> None:
    """What this turn says about who is on the line (and whether they want no more calls)."""
    callee = session.callee
    if callee is None:
        return
    if route == DO_NOT_CALL:
        callee.opt_out_words = text
    if callee.status == "asked" and last_action in ASK_FOR_CALLEE:
        if route == WRONG_NUMBER:
            callee.declined_as = "wrong_number"
            callee.move_to("declined")
        elif route == NOT_AVAILABLE:
            callee.declined_as = "not_available"
            callee.move_to("declined")
        elif route == SPEAKING or answer is Answer.YES or _names_themselves(text, callee):
            if callee.on_file:
                callee.move_to("answered")
            else:  # a number only: they asked for the call, there is no record to check
                _confirm(session)
        elif answer is Answer.NO:
            callee.declined_as = "no"
            callee.move_to("declined")
        elif route not in ASIDES:
            callee.missed()
    elif callee.status == "answered" and last_action in ASK_CALLEE_BIRTH_DATE:
        if route in (WRONG_NUMBER, NOT_AVAILABLE):  # "oh, you want my daughter"
            callee.declined_as = "not_available"
            callee.move_to("declined")
            return
        born = volunteered_birth_date(text, today, asked=True)
        if born is not None and callee.patient is not None \
                and born == callee.patient.date_of_birth:
            _confirm(session)
        elif route not in ASIDES:
            callee.missed()


def _names_themselves(text: str, callee: Callee) -> bool:
    """"This is Priya": they introduce themselves by the name asked for."""
    said = introduced_name(text, asked=True)
    return bool(said and callee.first_name and said[0].lower() == callee.first_name.lower())


def _confirm(session: GraphSession) -> None:
    """The person on the line is the patient: the call now knows who they are and what
    the call is about."""
    callee = session.callee
    assert callee is not None
    callee.move_to("confirmed")
    session.patient = callee.patient
    session.chart_stale = True
    if callee.patient is not None:
        upcoming = list(callee.upcoming or [])
        reminded = callee.appointment
        if reminded is not None and reminded.id not in {a.id for a in upcoming}:
            upcoming = sorted([*upcoming, reminded], key=lambda a: a.starts_at)
        session.upcoming = upcoming if callee.upcoming is not None or reminded else None
    if callee.appointment is not None:  # a reminder: about this booking
        session.targets = [callee.appointment.id]
        session.task = TaskKind.CONFIRM
    session.appointment_type = callee.offer_type or session.appointment_type
    if callee.offer is not None:  # a waitlist offer: this slot, for their yes
        ((ref, _),) = session.offer([callee.offer])
        session.picked_slot = ref
        session.task = TaskKind.BOOK
