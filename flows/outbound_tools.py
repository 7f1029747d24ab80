"""An outbound call's own tools, and closing its task when the call reaches its end.

`SetDoNotCall` honours "please don't call me again": the identified patient (else the
number dialled) is marked and every open task that would call them is cancelled
(db/outbound.set_do_not_call), with a `do_not_call` event in the call record.
`CheckOfferedSlot` looks again, after the right-person check, whether a waitlist
offer's slot is still open (the first confirmed answer wins it; the others hear it has
gone). `finish` closes the task with what the call found (flows/callee.TaskEnd); it
never raises: a task it could not close is in the call record, and the dialer's own
bookkeeping closes it after the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
from loguru import logger

from call.call_session import CallLog
from db import outbound
from db.deadline import within
from flows.callee import Callee
from flows.graph_session import GraphSession
from flows.recalls import offered
from services.practice.base import PracticeSystem

FINISH_TIMEOUT_S = 2.0
# The operator-queue concept of a "don't call me again" that could not be recorded.
UNRECORDED_OPT_OUT = "do_not_call_unrecorded"


class OutboundRefused(Exception):
    """Not an outbound call, or nothing to do (classified `guard`)."""


@dataclass
class OutboundTools:
    session: GraphSession
    pool: asyncpg.Pool
    log: CallLog
    practice: PracticeSystem
    now: Callable[[], datetime]

    def _callee(self) -> Callee:
        if self.session.callee is None:
            raise OutboundRefused("this is not an outbound call")
        return self.session.callee

    async def set_do_not_call(self, args: Mapping[str, Any]) -> str:
        """The patient if the call identified them, else the number it dialled."""
        callee, session = self._callee(), self.session
        patient_id = session.patient.id if session.patient is not None else None
        cancelled = await outbound.set_do_not_call(
            self.pool, session.workspace_id, patient_id=patient_id,
            phone=None if patient_id else callee.call.phone, call_id=session.call_id)
        callee.opted_out = True
        self.log.event("do_not_call", scope="patient" if patient_id else "number",
                       tasks_cancelled=cancelled)
        return "Recorded: the clinic will not call them again."

    async def check_offered_slot(self, args: Mapping[str, Any]) -> str:
        """Whether the waitlist slot is still open now (the schedule, as the practice
        system has it)."""
        callee, session = self._callee(), self.session
        slot = callee.offer
        if slot is None or callee.offer_type is None:
            callee.slot_gone = True
            return "That time is no longer open."
        day = slot.starts_at.astimezone(ZoneInfo(_zone(session, slot.location_id))).date()
        open_now = await self.practice.available_slots(
            session.service_id, appointment_type=callee.offer_type, first_day=day,
            last_day=day, now=self.now())
        if not any(offered(s, callee.call.offer or {}) for s in open_now):
            callee.slot_gone = True
            self.log.event("waitlist_slot_gone", found_by="check_before_offer")
            return "That time has just been taken by someone else."
        return "The time is still open."


def _zone(session: GraphSession, location_id: str) -> str:
    return next((loc.timezone for loc in session.locations if loc.id == location_id), "UTC")


async def finish(session: GraphSession, pool: asyncpg.Pool, log: CallLog) -> None:
    """Close the outbound call's task with what the call found (once; never raises). A
    "don't call me again" that was not recorded goes to the operator queue."""
    callee = session.callee
    if callee is None or callee.finished:
        return
    end = callee.ending()
    closed, failed = False, None
    try:
        closed = await within(
            outbound.finish_task(pool, callee.call.task_id, outcome=end.outcome,
                                 status=end.status, detail=end.detail),
            FINISH_TIMEOUT_S, what="finish outbound task")
    except Exception as error:  # noqa: BLE001 - the call ends either way; the dialer closes it
        failed = error
    # Finished only once the close was tried to its end: a close cut short (the turn
    # cancelled because the caller spoke again) is made when the call ends.
    callee.finished = True
    if callee.opt_out_words and not callee.opted_out:
        log.event("do_not_call_failed")
        log.escalation(UNRECORDED_OPT_OUT, "soft", similarity=None, judge=None,
                       reason="The person asked not to be called again and it could not be "
                              "recorded: mark them (or the number) as do-not-call")
    if failed is not None:
        logger.warning(f"call {session.call_id}: outbound task not finished "
                       f"({type(failed).__name__})")
        log.event("outbound_task_unfinished", outcome=end.outcome,
                  error=type(failed).__name__)
        return
    log.event("outbound_task_finished", outcome=end.outcome, status=end.status,
              detail=end.detail, already_closed=not closed)
