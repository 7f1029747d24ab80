"""What one booking call knows: who is calling, what they want, what was offered and confirmed.

The navigator writes it from the caller's words, the tools from the database; the
guards read it. Slot references are opaque (`S1`, `S2`, ...): the LLM and the caller
only ever see times and names, and a booking can only name a slot this call offered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from call.identity import CallIdentity
from config.memory import MemorySettings
from db.call_analyses import EarlierCall
from db.companion import Reminder
from db.memories import Memory
from db.opening import Closure
from db.scheduling import Appointment, AppointmentType, Location, Patient
from db.slots import Slot
from db.world import ClinicalContext
from flows.callee import Callee
from flows.router import TaskKind


@dataclass
class NewPatientDetails:
    """Who the caller says they are, as heard (asked for or volunteered), until confirmed."""

    first_name: str | None = None
    last_name: str | None = None
    date_of_birth: date | None = None
    phone: str | None = None  # a number they gave; else the one they call from
    disputed: bool = False  # they said the read-back was wrong without saying what is right

    @property
    def complete(self) -> bool:
        return bool(self.first_name and self.last_name and self.date_of_birth)

    @property
    def subject(self) -> str:
        """What a confirmation of these details is about: exactly this name and birth date."""
        return patient_subject(self.first_name, self.last_name, self.date_of_birth)


@dataclass
class Confirmation:
    """An explicit yes from the caller, to exactly what was read back, in that turn's words."""

    subject: str  # a slot ref, or "cancel:<id>,<id>"
    caller_words: str


@dataclass
class GraphSession:
    """What the call knows (booking calls; companion check-ins use the last fields too)."""

    identity: CallIdentity
    # who the caller is
    phone_matches: list[Patient] = field(default_factory=list)
    patient: Patient | None = None
    new_patient: NewPatientDetails = field(default_factory=NewPatientDetails)
    # intent
    task: TaskKind | None = None
    task_quote: str | None = None  # the caller's words that set the task (intent gate)
    last_action: str | None = None
    asked_in_a_row: int = 0  # turns in a row the agent did `last_action` and nothing new settled
    asked_since_outcome: dict[str, int] = field(default_factory=dict)  # action → times said
    progressed: bool = False  # the caller's latest turn settled something new
    time_wish_changed: bool = False  # ... and changed when they want to come in
    heard: list[str] = field(default_factory=list)  # the caller's turns, in order
    pending_requests: list[str] = field(default_factory=list)  # asked for, not yet handled
    # the world model: the identified caller's chart (ambient)
    chart: ClinicalContext | None = None
    chart_stale: bool = False  # a write changed what the chart should say
    # what the database said this call
    upcoming: list[Appointment] | None = None  # None: not loaded
    services: list[AppointmentType] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    closures: list[Closure] = field(default_factory=list)  # days the clinic or a location is shut
    practitioners: list[str] = field(default_factory=list)  # names, as the clinic lists them
    services_read: bool = False
    appointment_type: AppointmentType | None = None
    days: tuple[date, date] | None = None  # the caller's preferred days
    part_of_day: str | None = None
    not_weekdays: frozenset[int] = frozenset()  # days they cannot do (0 = Monday)
    practitioner: str | None = None  # the practitioner they asked for, by name
    location: str | None = None  # the location they asked for, by name
    offered: dict[str, Slot] = field(default_factory=dict)
    last_offer: list[str] = field(default_factory=list)  # refs just read out, in order
    # what the caller chose and confirmed
    picked_slot: str | None = None
    targets: list[str] = field(default_factory=list)  # appointment ids to cancel, move, confirm
    visit_reason: str | None = None  # what they want to be seen for, in their words
    problem_duration: str | None = None  # how long it has been going on, in their words
    callback_message: str | None = None  # what to pass on to the team
    callback_phone: str | None = None  # a number they gave for the call back (E.164)
    call_time: str | None = None  # when the clinic's promised call comes, as told
    confirmation: Confirmation | None = None
    booked: list[Appointment] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)  # patient ids this call created
    outcome: str | None = None  # what the last action's write did ("booked", "cancelled", ...)
    handoff_to: str | None = None  # the number TransferCall chose; dialled after the goodbye
    # This call can be put through to a person (a phone call the service can hand off).
    can_put_through: bool = False
    # The locations open now with a number to ring, this turn (only when it can).
    open_lines: list[Location] = field(default_factory=list)
    in_crisis: bool = False  # the caller spoke of ending their life: never hang up on them
    red_flag: bool = False  # the caller's words raised a medical red flag (or a crisis)
    crisis_escalated: bool = False  # the team was asked, urgently, to take this call
    return_to: list[str] = field(default_factory=list)  # side-loop origins, innermost last
    # the identified caller's memories of earlier calls (strongest first) and their calls
    # of today already analysed (newest first), for the ambient channel
    told_before: list[Memory] = field(default_factory=list)
    earlier_today: list[EarlierCall] = field(default_factory=list)
    welcomed_back: bool = False  # the offline reply has said what they did earlier today
    memory_policy: MemorySettings = field(default_factory=MemorySettings)
    # companion check-in calls: what earlier calls left, and what this one has done
    memories: list[Memory] = field(default_factory=list)  # latest said first
    followed_up: bool = False  # the latest memory was asked about
    reminders: list[Reminder] = field(default_factory=list)  # still open
    reminder_in_focus: Reminder | None = None  # the one just read out
    delivered: list[str] = field(default_factory=list)  # reminder ids read out this call
    noted: list[str] = field(default_factory=list)  # details saved this call
    acknowledged: list[Reminder] = field(default_factory=list)
    # an outbound call: who it is for and why (None: the caller rang the clinic)
    callee: Callee | None = None
    started: float = field(default_factory=time.monotonic)

    def offer(self, slots: list[Slot]) -> list[tuple[str, Slot]]:
        """Remember slots read to the caller; each gets a reference the booking must use."""
        refs = []
        for slot in slots:
            existing = next((ref for ref, s in self.offered.items() if s.key == slot.key), None)
            ref = existing or f"S{len(self.offered) + 1}"
            self.offered[ref] = slot
            refs.append((ref, slot))
        self.last_offer = [ref for ref, _ in refs]
        return refs

    @property
    def appointment_refs(self) -> dict[str, Appointment]:
        """`A1`, `A2`, ... for the loaded bookings, earliest first (ids stay server-side)."""
        return {f"A{i}": appointment for i, appointment in enumerate(self.upcoming or [], 1)}

    @property
    def reminder_refs(self) -> dict[str, Reminder]:
        """`R1`, `R2`, ... for the open reminders (ids stay server-side)."""
        return {f"R{i}": reminder for i, reminder in enumerate(self.reminders, 1)}

    @property
    def reminder_due(self) -> Reminder | None:
        """The next open reminder not yet read out this call."""
        return next((r for r in self.reminders if r.id not in self.delivered), None)

    @property
    def record_differs(self) -> bool:
        """The caller registered on this call and has since said their name or birth date
        differently from what was written."""
        patient, said = self.patient, self.new_patient
        if patient is None or patient.id not in self.registered or not said.complete:
            return False
        return ((said.first_name or "").lower(), (said.last_name or "").lower(),
                said.date_of_birth) != (patient.first_name.lower(), patient.last_name.lower(),
                                        patient.date_of_birth)

    @property
    def loaded_ids(self) -> set[str]:
        """Appointment ids the booked-appointments lookup returned to this call."""
        return {appointment.id for appointment in self.upcoming or []}

    def facts(self) -> dict[str, Any]:
        """What the call has settled so far, for a model's prompt (references, no ids). An
        outbound call's callee not yet confirmed as the patient: who to ask for, only."""
        if self.callee is not None and not self.callee.confirmed:
            return self.callee.facts()
        outbound = self.callee.facts() if self.callee is not None else {}
        return {**self._facts(), **outbound}

    def _facts(self) -> dict[str, Any]:
        refs = {a.id: ref for ref, a in self.appointment_refs.items()}
        if self.memories or self.reminders or self.noted:  # a companion check-in call
            focus = {r.id: ref for ref, r in self.reminder_refs.items()}
            return {
                "caller_first_name": self.patient.first_name if self.patient else None,
                "earlier_calls": [m.text for m in self.memories[:3]],
                "open_reminders": {ref: r.text for ref, r in self.reminder_refs.items()},
                "reminder_just_mentioned": focus.get(self.reminder_in_focus.id)
                if self.reminder_in_focus else None,
                "caller_confirmed": self.confirmation is not None,
                "noted_this_call": self.noted,
            }
        return {
            "caller_first_name": self.patient.first_name if self.patient else None,
            "identified": self.patient is not None,
            "task": self.task.value if self.task else None,
            "service": self.appointment_type.name if self.appointment_type else None,
            "slots_offered": self.last_offer,
            "slot_picked": self.picked_slot,
            "bookings_chosen": [refs.get(i, "") for i in self.targets],
            "caller_confirmed": self.confirmation is not None,
            "upcoming_bookings": None if self.upcoming is None else len(self.upcoming),
            "visit_reason": self.visit_reason,
        }

    @property
    def time_wish(self) -> tuple[Any, ...]:
        """When the caller wants to come in, as far as they have said."""
        return self.days, self.part_of_day, self.not_weekdays, self.practitioner, self.location

    def understood(self) -> tuple[Any, ...]:
        """Everything the caller's words can settle, to tell whether a turn settled any."""
        details = self.new_patient
        return (details.first_name, details.last_name, details.date_of_birth, details.phone,
                self.task, self.appointment_type, self.days, self.part_of_day,
                self.not_weekdays, self.practitioner, self.location, self.picked_slot,
                tuple(self.targets), self.confirmation, self.patient, self.callback_phone)

    @property
    def call_id(self) -> str:
        return self.identity.call_id

    @property
    def workspace_id(self) -> str:
        return self.identity.workspace_id or ""

    @property
    def service_id(self) -> str:
        return self.identity.service_id or ""

    @property
    def caller_number(self) -> str | None:
        return self.identity.caller_number

    def identified_patient_id(self) -> str | None:
        """The patient the caller was identified as, if they were."""
        return self.patient.id if self.patient is not None else None

    def chart_changed(self) -> None:
        """A write changed what the caller's chart should say: reload it before next use."""
        self.chart_stale = True

    def recent_caller_turns(self, count: int) -> list[str]:
        """The caller's last `count` turns, newest first."""
        return self.heard[-count:][::-1]

    def confirmed(self, subject: str) -> bool:
        return self.confirmation is not None and self.confirmation.subject == subject


def patient_subject(first: object, last: object, born: object) -> str:
    """What registering a patient needs confirmed: the name and birth date read back."""
    return f"patient:{str(first or '').lower()}|{str(last or '').lower()}|{born or ''}"


def cancel_subject(appointment_ids: list[str]) -> str:
    """What a cancellation confirmation is about: exactly these appointments."""
    return "cancel:" + ",".join(sorted(appointment_ids))


def attendance_subject(appointment_ids: list[str]) -> str:
    """What confirming attendance is about: exactly this booking read back."""
    return "attend:" + ",".join(sorted(appointment_ids))


def reminder_subject(reminder_id: str) -> str:
    """What a reminder confirmation is about: the person said they did exactly this."""
    return f"reminder:{reminder_id}"
