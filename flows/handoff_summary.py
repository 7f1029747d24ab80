"""What the person a call is handed to hears first: who is calling, why they asked for a
person, and what the agent already did, so the caller never has to start again.

Built from the call's own record of the conversation (the graph session), not from a
model: nothing is said that the call did not establish. It names the patient, so it is
said only to the clinic's own numbers and never logged.
"""

from __future__ import annotations

from flows.graph_session import GraphSession
from flows.router import TaskKind
from language.spoken import say_list, say_phone, say_time
from lib.prompts import render_prompt

WANTED = {
    TaskKind.BOOK: "They want to book an appointment.",
    TaskKind.RESCHEDULE: "They want to move an appointment.",
    TaskKind.CANCEL: "They want to cancel an appointment.",
    TaskKind.QUERY: "They are asking about their appointments.",
    TaskKind.CONFIRM: "They want to confirm an appointment.",
}


def handoff_summary(session: GraphSession | None, *, clinic: str, reason: str,
                    caller_number: str | None) -> str:
    return render_prompt("handoff/summary.txt", clinic=clinic, who=_who(session, caller_number),
                         why=_why(session, reason), done=_done(session))


def _who(session: GraphSession | None, caller_number: str | None) -> str:
    if session is not None and session.patient is not None:
        return f"The caller is {session.patient.full_name}, identified on this call."
    number = f", calling from {say_phone(caller_number)}" if caller_number else ""
    return f"The caller has not been identified{number}."


def _why(session: GraphSession | None, reason: str) -> str:
    parts = [f"Reason for the hand-off: {reason.rstrip('.')}."]
    if session is not None:
        if session.red_flag:
            parts.append("They described what may be an emergency.")
        if session.task in WANTED:
            parts.append(WANTED[session.task])
        if session.callback_message:
            parts.append(f"Their message: {session.callback_message.rstrip('.')}.")
    return " ".join(parts)


def _done(session: GraphSession | None) -> str:
    if session is None or not session.booked:
        return "Nothing was booked or changed on this call."
    booked = say_list([f"{a.type_name.lower()} with {a.practitioner_name} on "
                       f"{say_time(a.local_start)}" for a in session.booked])
    return f"On this call the agent booked: {booked}."
