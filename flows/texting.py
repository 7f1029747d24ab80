"""Texting a patient: on record first, then Twilio, and only its answer says "sent".

A text is written (`db/text_messages.begin`) before Twilio is asked, so one whose
answer is lost is still on record. A number that texted STOP is never tried. Twilio's
refusal is recorded with its code; a recipient who opted out at Twilio (21610) is
marked here too, so the next call does not offer a text at all. A request that outlasts
the bound is `unsure`: it may still arrive, so nobody is told it was or was not sent.
A reminder names its appointment, which gets one (`already_sent` for a second).

The body is never logged: it can name a patient's appointment.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import asyncpg
from loguru import logger

from db import text_messages as texts
from services.twilio.messages import Sender, SentMessage, TwilioMessageError

# Twilio usually answers in a few hundred milliseconds; past this the caller is not kept
# waiting for it. With the three database steps, a text takes under the 3 s a tool may.
SEND_TIMEOUT_S = 1.5
# Each database step of a text (the opt-out check, the record before and after).
RECORD_TIMEOUT_S = 0.4


class MessageSender(Protocol):
    """Twilio's Messages resource (services/twilio/messages.TwilioMessages)."""

    async def send(self, *, to: str, sender: Sender, body: str,
                   status_callback: str | None = None) -> SentMessage: ...


@dataclass(frozen=True)
class TextRequest:
    workspace_id: str
    kind: str  # db/text_messages.KINDS
    to: str
    body: str
    from_number: str | None  # the clinic's number on this call (None: the Messaging Service)
    call_id: str | None = None
    patient_id: str | None = None
    appointment_id: str | None = None  # what the text is about (one reminder each)


@dataclass(frozen=True)
class TextOutcome:
    """What became of one text. `why_not` is in plain words, for the caller."""

    sent: bool
    text_id: str | None = None
    why_not: str | None = None
    opted_out: bool = False
    unsure: bool = False  # Twilio did not answer in time: it may still arrive
    error_code: int | None = None
    retryable: bool = False  # Twilio could not take it now; it may later
    already_sent: bool = False  # the appointment's reminder went before


class Texter:
    """Sends the texts of one deployment: from the clinic's number on the call, or through
    a Messaging Service when one is configured (it picks the sender)."""

    def __init__(self, pool: asyncpg.Pool, messages: MessageSender, *,
                 messaging_service_sid: str | None = None,
                 status_callback: str | None = None,
                 timeout_s: float = SEND_TIMEOUT_S) -> None:
        self._pool = pool
        self._messages = messages
        self._service = messaging_service_sid
        self._status_callback = status_callback
        self._timeout_s = timeout_s

    def can_send_from(self, from_number: str | None) -> bool:
        return bool(self._service or from_number)

    async def may_text(self, workspace_id: str, to: str) -> bool:
        """False when the number texted STOP to the workspace."""
        return await asyncio.wait_for(texts.may_text(self._pool, workspace_id, to),
                                      RECORD_TIMEOUT_S)

    async def send(self, request: TextRequest) -> TextOutcome:
        """Record, send and record the answer. Database failures raise (the caller's
        tool reports them); Twilio's refusals and silence are outcomes."""
        if not self.can_send_from(request.from_number):
            return TextOutcome(False, why_not="this clinic has no number to text from")
        if not await self.may_text(request.workspace_id, request.to):
            return TextOutcome(False, why_not="they asked for no texts from the clinic",
                               opted_out=True)
        try:
            text_id = await asyncio.wait_for(texts.begin(
                self._pool, workspace_id=request.workspace_id, kind=request.kind, to=request.to,
                from_=None if self._service else request.from_number, body=request.body,
                call_id=request.call_id, patient_id=request.patient_id,
                appointment_id=request.appointment_id), RECORD_TIMEOUT_S)
        except texts.AlreadySent:
            return TextOutcome(False, why_not="it was sent already", already_sent=True)
        sender = (Sender(messaging_service_sid=self._service) if self._service
                  else Sender(number=request.from_number))
        try:
            sent = await asyncio.wait_for(self._messages.send(
                to=request.to, sender=sender, body=request.body,
                status_callback=self._status_callback), self._timeout_s)
        except TimeoutError:
            logger.warning(f"text {text_id}: Twilio did not answer in {self._timeout_s} s")
            return TextOutcome(False, text_id, why_not="the text service did not answer in time",
                               unsure=True)
        except TwilioMessageError as error:
            return await self._refused(request, text_id, error)
        await asyncio.wait_for(texts.accepted(self._pool, text_id, sid=sent.sid,
                                              status=sent.status), RECORD_TIMEOUT_S)
        return TextOutcome(True, text_id)

    async def _refused(self, request: TextRequest, text_id: str,
                       error: TwilioMessageError) -> TextOutcome:
        logger.warning(f"text {text_id} not sent ({error})")
        await asyncio.wait_for(texts.refused(self._pool, text_id, code=error.code),
                               RECORD_TIMEOUT_S)
        if error.opted_out:
            await asyncio.wait_for(texts.opt_out(self._pool, request.workspace_id, request.to),
                                   RECORD_TIMEOUT_S)
            return TextOutcome(False, text_id, why_not="they asked for no texts from the clinic",
                               opted_out=True, error_code=error.code)
        why = ("the text service could not be reached" if error.retryable
               else "the text service refused it")
        return TextOutcome(False, text_id, why_not=why, error_code=error.code,
                           retryable=error.retryable)
