"""Who an outbound call is for and why, and whether the person on the line is them.

Loaded when the call starts (the patient's record, the reminder's appointment, the
waitlist slot on offer), but held apart from the call's identified caller: until the
right-person check passes, the person who answered is nobody in particular, and the
only thing about the patient the agent may use is the first name it asks for them by.
The check's state is `status`:

- `asked`: the agent said who is calling and asked for the person;
- `answered`: they said it is them; their date of birth is asked for next;
- `confirmed`: the date of birth matched the record (a callee with no record: they said
  they asked for the call); from here the call is about the patient's care;
- `declined`: a wrong number, or the person is not there (`declined_as`);
- `unconfirmed`: the check did not pass (twice unclear, or the wrong birth date twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from call.outbound_call import OutboundCall
from db.scheduling import Appointment, AppointmentType, Patient
from db.slots import Slot
from language.spoken import say_time

CalleeStatus = Literal["asked", "answered", "confirmed", "declined", "unconfirmed"]
CALLEE_STATUSES: tuple[str, ...] = ("asked", "answered", "confirmed", "declined", "unconfirmed")
# Tries at each step of the check before it is given up (unclear answers, wrong dates).
CHECK_TRIES = 2


@dataclass(frozen=True)
class TaskEnd:
    """How the call's task is closed (db/outbound.finish_task)."""

    outcome: str
    status: Literal["done", "failed"]
    detail: str


@dataclass
class Callee:
    call: OutboundCall
    patient: Patient | None = None  # the record the task names (None: a number only)
    upcoming: list[Appointment] | None = None  # theirs, handed over once confirmed
    appointment: Appointment | None = None  # a reminder's appointment
    offer: Slot | None = None  # a waitlist offer's slot
    offer_type: AppointmentType | None = None
    status: CalleeStatus = "asked"
    misses: int = 0  # unclear answers or wrong dates at the current step
    declined_as: Literal["wrong_number", "not_available", "no"] | None = None
    opt_out_words: str | None = None  # their words asking not to be called again
    opted_out: bool = False  # recorded (db/outbound.set_do_not_call)
    slot_gone: bool = False  # the waitlist slot went to someone else
    done: list[str] = field(default_factory=list)  # what the call did for the task
    finished: bool = False  # the task was closed

    @property
    def kind(self) -> str:
        return self.call.kind

    @property
    def on_file(self) -> bool:
        """The task names a patient (else it has a number only)."""
        return self.call.patient_id is not None

    @property
    def confirmed(self) -> bool:
        return self.status == "confirmed"

    @property
    def first_name(self) -> str:
        return self.patient.first_name if self.patient is not None else ""

    def missed(self) -> None:
        """One more unclear answer or wrong date; the check ends after `CHECK_TRIES`."""
        self.misses += 1
        if self.misses >= CHECK_TRIES:
            self.status = "unconfirmed"

    def move_to(self, status: CalleeStatus) -> None:
        self.status = status
        self.misses = 0

    @property
    def reason(self) -> str:
        """Why the clinic calls, as a phrase that follows "about" (the task's reason)."""
        text = " ".join(self.call.reason.split()).rstrip(".")
        return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text

    def facts(self) -> dict[str, Any]:
        """What a model may know of the call: before the check, who to ask for and nothing
        else; after it, why the clinic calls."""
        if not self.confirmed:
            return {
                "outbound_call": True,
                "ask_for": self.first_name or "the person who asked the clinic to call back",
                "right_person_confirmed": False,
                "person_said": self.status,
            }
        facts: dict[str, Any] = {
            "outbound_call": True, "right_person_confirmed": True, "kind": self.kind,
            "reason": self.call.reason, "goal": self.call.goal,
        }
        if self.appointment is not None:
            facts["appointment"] = (
                f"{self.appointment.type_name} with {self.appointment.practitioner_name} at "
                f"{self.appointment.location_name}, {say_time(self.appointment.local_start)}")
        if self.offer is not None:
            facts["offered_slot"] = (
                f"{say_time(self.offer.starts_at)} with {self.offer.practitioner_name} at "
                f"{self.offer.location_name}" + ("" if not self.slot_gone else " (now taken)"))
        return facts

    def ending(self) -> TaskEnd:
        """How the task ends when the call does, from what the call found and did."""
        done = ", ".join(self.done)
        if self.opted_out or self.opt_out_words:  # recorded, or handed to the team to record
            return TaskEnd("opted_out", "done", "asked not to be called again")
        if self.status == "declined":
            detail = {"not_available": "not available", "no": "declined"}.get(
                self.declined_as or "", "wrong number")
            return TaskEnd("wrong_person", "failed", detail)
        if not self.confirmed:
            return TaskEnd("failed", "failed", "the right person was not confirmed")
        if self.slot_gone and "booked" not in self.done:
            return TaskEnd("slot_gone", "done", done or "the slot was taken")
        return TaskEnd("answered", "done", done)
