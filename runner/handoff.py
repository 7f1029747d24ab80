"""Warm hand-offs: the caller put through to a person in a Twilio conference, the person
hearing a summary of the call before they join.

`begin` places the person's leg (their phone rings; once answered it hears the summary,
then enters the conference and starts it) and moves the caller's call into the same
conference, where they wait in silence until the person joins; the agent's media stream
ends there. Either party leaving ends the conference. With forks on (the
service's), each leg's audio is also streamed to `/ws/listen` (runner/listen.py), so the
record keeps both parties' words, the caller's and the person's.

How it ends comes from Twilio's callbacks (`api/handoff_webhooks.py`): the person joining
is `answered`; their call ending `no-answer`, `busy` or `failed`, or after answering
without joining, is `no_answer`, `busy`, `failed` or `declined`, and the caller is taken
back to the agent (`<Connect><Stream>` with `resume`), who offers a call back. Every
outcome is an event on the call's record (`handoff_outcome`) and a `handoffs` row.
Callbacks can overtake `begin`: a busy line can be reported before the caller is in the
conference (then the move, coming second, takes the caller back), and the person can
join before their leg's sid is on record (the person is whoever is not the caller).

The summary can name the patient and why they called: it goes only to the clinic's own
numbers (a location's, the operator's) and is never logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import asyncpg
from loguru import logger

from call.call_session import CallLog, CallSession
from config import Settings
from db import handoffs
from db import repositories as repo
from db.handoffs import Handoff
from flows.graph_session import GraphSession
from flows.handoff_summary import handoff_summary
from runner.post_call import SEQ_ROOM
from services.twilio.calls import PlacedCall, TwilioCallError, TwilioCalls
from services.twilio.numbers import TwilioAccount
from services.twilio.twiml import Conference, Fork, back_to_agent_twiml, conference_twiml

# How long the person's phone rings before the hand-off is `no_answer`.
RING_S = 20
# Twilio's call statuses that mean the person was not reached, as outcomes.
NOT_REACHED = {"no-answer": "no_answer", "busy": "busy", "failed": "failed",
               "canceled": "no_answer"}
# Why a call was put through, by who asked (`CallSession.transfer_why`); a graph state
# means the caller asked.
REASONS = {
    "operator": "a member of the team asked to take this call",
    "safety_escalation": "the call needs a person, for the caller's safety",
    "held": "the call was held for a person",
    "time_limit": "the call reached its time limit",
}
CALLER_ASKED = "the caller asked to speak with a person"
# Where a call the agent takes back goes on from: the call-back offer, its message asked.
RESUME_AT = ("handoff_prep", "ask_callback_message")


class HandoffCalls(Protocol):
    """The account's Calls resource (services/twilio/calls.TwilioCalls)."""

    async def create(self, *, to: str, from_: str, status_callback: str, url: str | None = None,
                     twiml: str | None = None, machine_detection: bool = True,
                     ring_s: int | None = None) -> PlacedCall: ...

    async def run_twiml(self, sid: str, twiml: str) -> None: ...


@dataclass(frozen=True)
class HandoffRequest:
    call_id: str
    workspace_id: str
    caller_call_sid: str
    number: str  # the person's phone: a location's or the operator's, from records only
    from_number: str  # the clinic's number the caller dialled
    destination: str  # what the caller and the record call it ("the Downtown clinic")
    reason: str
    summary: str


class WarmHandoffs:
    """The process's hand-offs through one Twilio account."""

    def __init__(self, pool: asyncpg.Pool, calls: HandoffCalls, public_url: str, *,
                 ring_s: int = RING_S, forks: bool = False) -> None:
        self._pool = pool
        self._calls = calls
        self._base = public_url.rstrip("/")
        self._ws = "ws" + self._base.removeprefix("http")
        self._ring_s = ring_s
        self._forks = forks

    async def begin(self, request: HandoffRequest, log: CallLog) -> Handoff:
        """Ring the person and move the caller into the conference. Raises
        TwilioCallError when the person's leg could not be placed (the caller's call is
        then left as it was)."""
        handoff = await handoffs.begin(
            self._pool, call_id=request.call_id, workspace_id=request.workspace_id,
            reason=request.reason, destination=request.destination, number=request.number,
            conference=f"handoff-{uuid.uuid4().hex}", caller_call_sid=request.caller_call_sid,
            summary=request.summary,
            seq_base=await repo.last_record_seq(self._pool, request.call_id) + SEQ_ROOM)
        room = Conference(handoff.conference,
                          status_callback=f"{self._base}/voice/handoff/{handoff.id}/conference")
        placed = await self._calls.create(
            to=request.number, from_=request.from_number, machine_detection=False,
            ring_s=self._ring_s,
            status_callback=f"{self._base}/voice/handoff/{handoff.id}/operator",
            twiml=conference_twiml(room, say=request.summary, starts=True,
                                   fork=self._fork(request.call_id, "operator")))
        await handoffs.operator_dialled(self._pool, handoff.id, placed.sid)
        await self._calls.run_twiml(request.caller_call_sid, conference_twiml(
            room, starts=False, fork=self._fork(request.call_id, "caller")))
        log.event("handoff_started", handoff_id=handoff.id, destination=request.destination,
                  reason=request.reason)
        moved = await handoffs.caller_moved(self._pool, handoff.id, datetime.now(UTC))
        if moved.outcome in NOT_REACHED.values():
            # The person's leg failed before the caller reached the conference.
            await self._take_back(moved, log)
        return moved

    async def operator_status(self, handoff_id: str, status: str, log: CallLog) -> None:
        """The person's leg moved on: not reached, or over without having joined."""
        if status in NOT_REACHED:
            await self._not_reached(handoff_id, NOT_REACHED[status], log)
        elif status == "completed":
            await self._not_reached(handoff_id, "declined", log)  # only if never joined

    async def conference_event(self, handoff_id: str, event: str, call_sid: str | None,
                               log: CallLog) -> None:
        handoff = await handoffs.get(self._pool, handoff_id)
        if handoff is None:
            return
        now = datetime.now(UTC)
        # Two parties join: the caller and the person. The person's leg may join before
        # its call sid is on record, so the person is whoever is not the caller.
        if event == "participant-join" and call_sid and call_sid != handoff.caller_call_sid:
            if await handoffs.settle(self._pool, handoff_id, "answered", now) is not None:
                log.event("handoff_outcome", handoff_id=handoff_id, outcome="answered",
                          destination=handoff.destination)
        elif event == "conference-end":
            await handoffs.ended(self._pool, handoff_id, now)
            log.event("handoff_ended", handoff_id=handoff_id)

    async def _not_reached(self, handoff_id: str, outcome: str, log: CallLog) -> None:
        settled = await handoffs.settle(self._pool, handoff_id, outcome, datetime.now(UTC))
        if settled is None:  # answered already, or settled by an earlier callback
            return
        log.event("handoff_outcome", handoff_id=handoff_id, outcome=outcome,
                  destination=settled.destination)
        if settled.caller_moved_at is None:
            return  # still being moved into the conference: `begin` takes them back
        await self._take_back(settled, log)

    async def _take_back(self, handoff: Handoff, log: CallLog) -> None:
        """The caller, whom nobody will join, back to the agent."""
        try:
            await self._calls.run_twiml(handoff.caller_call_sid, back_to_agent_twiml(
                f"{self._ws}/ws", handoff.call_id, resume=f"handoff_{handoff.outcome}"))
        except TwilioCallError as error:  # the caller hung up while waiting
            logger.info(f"hand-off {handoff.id}: the caller could not be taken back ({error})")
            log.event("handoff_caller_gone", handoff_id=handoff.id)

    def _fork(self, call_id: str, party: str) -> Fork | None:
        return Fork(f"{self._ws}/ws/listen", call_id, party) if self._forks else None


def warm_handoffs(settings: Settings, pool: asyncpg.Pool) -> WarmHandoffs | None:
    """Hand-offs through the Twilio account; None without one or without PUBLIC_URL (the
    address Twilio's conference callbacks reach): transfers then dial straight through."""
    telephony, public_url = settings.telephony, settings.server.public_url
    if not (telephony.twilio_account_sid and telephony.twilio_auth_token and public_url):
        return None
    account = TwilioAccount(telephony.twilio_account_sid,
                            telephony.twilio_auth_token.get_secret_value(),
                            telephony.twilio_api_base_url)
    return WarmHandoffs(pool, TwilioCalls(account), public_url, forks=True)


def hand_off_for(warm: WarmHandoffs | None, session: CallSession, booking: GraphSession | None,
                 clinic_number: str | None) -> Callable[[str], Awaitable[bool]] | None:
    """What puts this call through to `number` warmly; None when it cannot be done (no
    hand-offs here, no Twilio call, no clinic number to ring the person from)."""
    if warm is None or not session.call_sid or not clinic_number or not session.workspace_id:
        return None
    call_sid, workspace_id = session.call_sid, session.workspace_id

    async def hand_off(number: str) -> bool:
        locations = booking.locations if booking is not None else []
        place = next((f"our {loc.name} clinic" for loc in locations
                      if loc.phone_number == number), "the team")
        reason = REASONS.get(session.transfer_why or "", CALLER_ASKED)
        request = HandoffRequest(
            call_id=session.call_id, workspace_id=workspace_id, caller_call_sid=call_sid,
            number=number, from_number=clinic_number, destination=place, reason=reason,
            summary=handoff_summary(booking, clinic=session.clinic_name, reason=reason,
                                    caller_number=session.caller_number))
        try:
            await warm.begin(request, session.log)
        except (TwilioCallError, asyncpg.PostgresError, OSError) as error:
            logger.warning(f"call {session.call_id}: warm hand-off not started "
                           f"({type(error).__name__}); putting the caller straight through")
            session.log.event("handoff_failed", error=type(error).__name__)
            return False
        return True

    return hand_off
