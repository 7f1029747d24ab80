"""After a booking: its confirmation text, its video-visit link, its deposit link, and
whether the deposit is paid, for the identified patient only.

`SendTextMessage` texts to the phone on the identified patient's record, never to a
number heard in the call; a confirmation carries the visit's links. What the agent says
follows what happened: "I've texted…" only when Twilio took the text; a refusal, a
silence past the bound or a link that could not be made is said as it is, each with an
event in the call record (`text_not_sent`, `text_unconfirmed`, `visit_link_failed`). A
link a provider could not make now is made by a job (`db.visit_links.FINISH_JOB`),
which texts it when it is ready: only then does the agent say it will come.

A booking is followed by these on its own (`follow_ups`) when the deployment can text
the patient: the video link for a video visit, the deposit link where the visit's type
takes one, then the confirmation text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from call.call_session import CallLog
from db import jobs, visit_links
from db.scheduling import Appointment
from db.visit_links import FINISH_JOB, VisitLink, VisitTerms
from flows.graph_session import GraphSession
from flows.reach import Reach
from flows.texting import TextOutcome, TextRequest
from flows.visit_links import LinkNotMade, Needed, deposit_paid, payment_link, video_link
from language.spoken import say_price
from lib.prompts import render_prompt

TEXT_KINDS = ("confirmation", "telehealth_link", "payment_link")
LINK_TOOLS = {"video": "GetTelehealthLink", "payment": "CreatePaymentLink"}
# Every tool here: a failure of one is said in its own words (NotReached), never as the
# booking system being down.
TOOLS = frozenset({"SendTextMessage", *LINK_TOOLS.values(), "CheckPaymentStatus"})


class NotReached(Exception):
    """The text or link did not go; the message says so, in words for the caller."""


class NothingToDo(Exception):
    """Asked for what this call has no booking for (classified `guard`)."""


@dataclass
class PostBookingTools:
    session: GraphSession
    pool: asyncpg.Pool
    log: CallLog
    reach: Reach
    clinic_name: str
    from_number: str | None  # the clinic's number on this call

    # --- After a booking, on its own ----------------------------------------------------

    async def follow_ups(self, offered: frozenset[str]) -> list[str]:
        """The tools that follow the booking just made, among those the state `offered`:
        its links, then its confirmation text. None when the patient cannot be texted
        (a link no one receives is not made during the call)."""
        if "SendTextMessage" not in offered or not await self._can_text():
            return []
        terms = await self._terms()
        needed = Needed.of(terms) if terms is not None else Needed(False, False)
        links = [LINK_TOOLS[kind] for kind, wanted in (("video", needed.video),
                                                        ("payment", needed.deposit)) if wanted]
        return [tool for tool in links if tool in offered] + ["SendTextMessage"]

    async def _can_text(self) -> bool:
        texter, patient = self.reach.texter, self.session.patient
        if texter is None or patient is None or not patient.phone or not self.session.booked:
            return False
        if not texter.can_send_from(self.from_number):
            return False
        return await texter.may_text(self.session.workspace_id, patient.phone)

    # --- The tools --------------------------------------------------------------------

    async def send_text(self, args: Mapping[str, Any]) -> str:
        kind = str(args.get("kind") or "confirmation")
        if kind not in TEXT_KINDS:
            raise NothingToDo(f"there is no {kind} text; send one of {', '.join(TEXT_KINDS)}")
        texter, session = self.reach.texter, self.session
        if texter is None:
            raise self._not_sent(kind, "texting is not set up for this clinic",
                                 "I'm not able to send texts from here.")
        patient = session.patient
        if patient is None or not patient.phone:
            raise self._not_sent(kind, "no phone number on record",
                                 "There's no mobile number on your record for me to text.")
        appointment = self._booking()
        links = await visit_links.links_of(self.pool, appointment.id)
        body = text_body(kind, self.clinic_name, appointment, links)
        outcome = await texter.send(TextRequest(
            workspace_id=session.workspace_id, kind=kind, to=patient.phone, body=body,
            from_number=self.from_number, call_id=session.call_id, patient_id=patient.id))
        return self._said(kind, outcome, patient.phone, links)

    async def get_video_link(self, args: Mapping[str, Any]) -> str:
        terms = await self._booked_terms()
        if not terms.video:
            raise NothingToDo("this booking is an in-person visit: it has no video link")
        try:
            await video_link(self.pool, self.reach, terms, call_id=self.session.call_id)
        except LinkNotMade as failure:
            raise await self._link_failed("video", terms, failure) from None
        return "The video link for the visit is ready; it goes in the text to the patient."

    async def create_payment_link(self, args: Mapping[str, Any]) -> str:
        terms = await self._booked_terms()
        if not terms.deposit_cents:
            raise NothingToDo("this visit takes no deposit")
        try:
            link = await payment_link(self.pool, self.reach, terms,
                                      deposit_description(terms, self._booking()),
                                      call_id=self.session.call_id)
        except LinkNotMade as failure:
            raise await self._link_failed("payment", terms, failure) from None
        return (f"A link to pay the {_amount(link)} deposit is ready; it goes in the text to "
                "the patient.")

    async def check_payment(self, args: Mapping[str, Any]) -> str:
        link = await self._payment_link()
        try:
            paid = await deposit_paid(self.pool, self.reach, link)
        except LinkNotMade as failure:
            self.log.event("payment_status_unknown", reason=failure.reason)
            raise NotReached("I can't check the payment just now; the booking stands "
                             "either way.") from None
        self.log.event("payment_status", paid=paid)
        if paid:
            return f"The {_amount(link)} deposit has been paid. Thank you."
        return (f"The {_amount(link)} deposit hasn't been paid yet; the link to pay it is in "
                "the text we sent.")

    # --- What is said -----------------------------------------------------------------

    def _said(self, kind: str, outcome: TextOutcome, phone: str,
              links: Mapping[str, VisitLink]) -> str:
        if outcome.sent:
            self.log.event("text_sent", kind=kind, text_id=outcome.text_id,
                           links=sorted(links))
            return (f"I've texted the details{_with(links)} to your number ending in "
                    f"{_last_digits(phone)}.")
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

    async def _link_failed(self, kind: str, terms: VisitTerms,
                           failure: LinkNotMade) -> NotReached:
        """What the caller hears when a link could not be made: it will be texted when
        ready only if a job was queued to make and text it."""
        queued = failure.retryable and await self._queue_finish(terms)
        self.log.event("visit_link_failed", kind=kind, reason=failure.reason,
                       retryable=failure.retryable, texted_later=queued)
        what = "the video link" if kind == "video" else "the link for the deposit"
        if queued:
            return NotReached(f"I couldn't get {what} just now; I'll text it to you as soon "
                              "as it's ready.")
        return NotReached(f"I couldn't set up {what}; please call us before the visit and "
                          "we'll sort it out.")

    async def _queue_finish(self, terms: VisitTerms) -> bool:
        if not await self._can_text():
            return False
        await jobs.enqueue(self.pool, FINISH_JOB, {
            "appointment_id": terms.appointment_id, "call_id": self.session.call_id,
            "clinic_name": self.clinic_name, "from_number": self.from_number,
        }, dedupe_key=f"{FINISH_JOB}:{terms.appointment_id}")
        return True

    # --- What the tools act on --------------------------------------------------------

    def _booking(self) -> Appointment:
        if not self.session.booked:
            raise NothingToDo("nothing was booked on this call")
        return self.session.booked[-1]

    async def _terms(self) -> VisitTerms | None:
        return await visit_links.terms(self.pool, self._booking().id)

    async def _booked_terms(self) -> VisitTerms:
        terms = await self._terms()
        if terms is None or not terms.live:
            raise NothingToDo("the booking is no longer on record")
        return terms

    async def _payment_link(self) -> VisitLink:
        """The deposit link of this call's booking, else the patient's latest one."""
        link = None
        if self.session.booked:
            link = await visit_links.link_of(self.pool, self.session.booked[-1].id, "payment")
        if link is None and self.session.patient is not None:
            link = await visit_links.latest_payment_link(self.pool, self.session.patient.id)
        if link is None:
            raise NothingToDo("there is no deposit link for this caller's bookings")
        return link


def text_body(kind: str, clinic: str, appointment: Appointment,
              links: Mapping[str, VisitLink]) -> str:
    """A text's body: the booking in the location's own time and its links, no reason
    for the visit (whoever holds the phone can read it)."""
    extras = "".join(f"\n{label}: {links[kind_].url}" for kind_, label in (
        ("video", "Video visit"), ("payment", _deposit_label(links))) if kind_ in links)
    return render_prompt(
        f"sms/{kind}.txt", clinic=clinic, service=appointment.type_name.lower(),
        practitioner=appointment.practitioner_name, location=appointment.location_name,
        when=written_time(appointment), extras=extras)


def deposit_description(terms: VisitTerms, appointment: Appointment) -> str:
    """What the payment page shows: the visit, never the patient."""
    return f"Deposit: {terms.type_name}, {written_time(appointment)}"


def written_time(appointment: Appointment) -> str:
    """'Fri 4 Dec at 9:00 AM': the start as a text writes it, in the location's time."""
    start = appointment.local_start
    return f"{start:%a} {start.day} {start:%b} at {start.hour % 12 or 12}:{start:%M %p}"


def _deposit_label(links: Mapping[str, VisitLink]) -> str:
    link = links.get("payment")
    return f"Deposit ({_amount(link)})" if link is not None else "Deposit"


def _amount(link: VisitLink) -> str:
    return say_price(link.amount_cents or 0, link.currency or "USD")


def _with(links: Mapping[str, VisitLink]) -> str:
    parts = [part for kind, part in (("video", "the link for your video visit"),
                                     ("payment", "a link to pay the deposit"))
             if kind in links]
    return ", with " + " and ".join(parts) + "," if parts else ""


def _last_digits(phone: str) -> str:
    return " ".join(ch for ch in phone if ch.isdigit())[-7:]
