"""After a booking: the confirmation text, sent to the identified patient only.

`SendTextMessage` texts the booking's details to the phone on the identified patient's
record, never to a number heard in the call. What the agent says depends on what
happened: "I've texted…" only when Twilio took the text; when it refused or could not
be reached, that the text did not go; when it did not answer in time, that it may
still arrive. Each text not sent is an event in the call record (`text_not_sent`).
A booking is followed by its confirmation text on its own (`confirm_booking`) when the
deployment can text and the patient has a number that did not text STOP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from call.call_session import CallLog
from db.scheduling import Appointment
from flows.graph_session import GraphSession
from flows.texting import Texter, TextOutcome, TextRequest
from lib.prompts import render_prompt

TEXT_KINDS = ("confirmation",)


class NotReached(Exception):
    """The text (or link) did not go; the message says so, in words for the caller."""


@dataclass(frozen=True)
class Reach:
    """How a deployment reaches patients beyond the call (None: not configured here)."""

    texter: Texter | None = None


@dataclass
class PostBookingTools:
    session: GraphSession
    pool: asyncpg.Pool
    log: CallLog
    reach: Reach
    clinic_name: str
    from_number: str | None  # the clinic's number on this call

    async def confirm_booking(self) -> bool:
        """Whether the booking just made is followed by its confirmation text: texting
        is set up, and the patient has a number that did not opt out."""
        texter, patient = self.reach.texter, self.session.patient
        if texter is None or patient is None or not patient.phone or not self.session.booked:
            return False
        if not texter.can_send_from(self.from_number):
            return False
        return await texter.may_text(self.session.workspace_id, patient.phone)

    async def send_text(self, args: Mapping[str, Any]) -> str:
        kind = str(args.get("kind") or "confirmation")
        if kind not in TEXT_KINDS:
            raise NotReached(f"there is no {kind} text to send")
        texter, session = self.reach.texter, self.session
        if texter is None:
            raise self._not_sent(kind, "texting is not set up for this clinic",
                                 "I'm not able to send texts from here.")
        patient = session.patient
        if patient is None or not patient.phone:
            raise self._not_sent(kind, "no phone number on record",
                                 "There's no mobile number on your record for me to text.")
        if not session.booked:
            raise self._not_sent(kind, "nothing booked on this call",
                                 "There's no booking from this call to text you about.")
        appointment = session.booked[-1]
        outcome = await texter.send(TextRequest(
            workspace_id=session.workspace_id, kind=kind, to=patient.phone,
            body=confirmation_text(self.clinic_name, appointment), from_number=self.from_number,
            call_id=session.call_id, patient_id=patient.id))
        return self._said(kind, outcome, patient.phone)

    def _said(self, kind: str, outcome: TextOutcome, phone: str) -> str:
        if outcome.sent:
            self.log.event("text_sent", kind=kind, text_id=outcome.text_id)
            return f"I've texted the details to your number ending in {_last_digits(phone)}."
        if outcome.unsure:
            self.log.event("text_unconfirmed", kind=kind, text_id=outcome.text_id)
            return ("I couldn't confirm the text went out, so it may or may not arrive; "
                    "the booking stands either way.")
        if outcome.opted_out:
            raise self._not_sent(kind, "opted out", "You've asked us not to text you, so I "
                                 "haven't sent one.", code=outcome.error_code)
        raise self._not_sent(kind, outcome.why_not or "not sent",
                             "I couldn't send the text just now, so please note the details.",
                             code=outcome.error_code)

    def _not_sent(self, kind: str, reason: str, said: str, *, code: int | None = None
                  ) -> NotReached:
        self.log.event("text_not_sent", kind=kind, reason=reason, error_code=code)
        return NotReached(said)


def confirmation_text(clinic: str, appointment: Appointment, extras: str = "") -> str:
    """The confirmation's body: the booking in the location's own time, no reason for
    the visit (whoever holds the phone can read it)."""
    return render_prompt(
        "sms/confirmation.txt", clinic=clinic, service=appointment.type_name.lower(),
        practitioner=appointment.practitioner_name, location=appointment.location_name,
        when=written_time(appointment), extras=extras)


def written_time(appointment: Appointment) -> str:
    """'Fri 4 Dec at 9:00 AM': the start as a text writes it, in the location's time."""
    start = appointment.local_start
    return f"{start:%a} {start.day} {start:%b} at {start.hour % 12 or 12}:{start:%M %p}"


def _last_digits(phone: str) -> str:
    return " ".join(ch for ch in phone if ch.isdigit())[-7:]
