"""The dispatcher: dials each due outbound task through Twilio and follows the call to
its outcome. It runs as the task's `outbound_dial` job, which is the task's alarm clock:
each run looks at the task as it is now and does the one next thing.

- **Closed** (done, failed, cancelled, claimed): nothing.
- **Pending**: the callee asked not to be called → cancelled, `opted_out`; a waitlist
  offer whose slot has gone (booked, or too close to reach) → cancelled, `slot_gone`.
  Otherwise the first moment the calling window and the number's daily limit allow;
  later than now → the job runs again then. No free line (inbound calls first) → again shortly. Not its
  turn yet (`OUTBOUND_DIALS_PER_SECOND` per process) → again at its turn. Then the
  attempt is written `dialing` with the task `in_progress` and committed, and only then
  is Twilio asked to place the call; the SID it answers with is stored.
- **In progress, the latest attempt `dialing` with no SID**: the process stopped between
  writing the attempt and hearing from Twilio. Twilio is asked which calls it placed to
  that number since: one found is adopted (never dialled again); none → that same
  attempt is dialled when the rules allow. So no one is called twice.
- **In progress, a placed call**: its status callback normally ends it; the job looks
  with Twilio every `OUTBOUND_FOLLOW_UP_S` in case that callback never comes.

A job can run again after its worker died: every step is written so that running it
twice does it once. The time comes from the runtime's clock (a fake one in tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import asyncpg
from loguru import logger
from pgqueuer import RetryRequested

from config import Settings
from db import outbound
from db import outbound_dial as dials
from db import repositories as repo
from db.outbound import OPEN_STATUSES, Attempt, OutboundTask
from db.outbound_dial import Close, Keep, NextStep, Retry
from db.waitlist_offers import offer_still_open
from runner.outbound.context import DAY, earliest_dial, load_callee, load_clinic
from runner.outbound.outcomes import (
    FAX,
    NOT_REACHED,
    SAID,
    TERMINAL,
    outcome_of,
    progress_of,
)
from runner.outbound.pace import DialPace
from runner.outbound.twilio_calls import CallPlacer, TwilioCallError, twilio_calls

if TYPE_CHECKING:
    from runner.runtime import AppRuntime

# Twilio's clock and ours may differ a little: calls placed this long before the attempt
# was written still count as its own.
CLOCK_MARGIN = timedelta(seconds=10)
# A dial Twilio did not confirm (a timeout, a dropped connection) is checked this soon.
UNCONFIRMED_RECHECK = timedelta(seconds=30)
# A call Twilio no longer lists this long after it started is given up as failed.
FOLLOW_GIVE_UP_AFTER = timedelta(hours=2)
FAX_ANSWERED = "a fax machine answered"
NO_WINDOW = ("no calling window within the next 21 days (the task's hours, the callee's "
             "8 am to 9 pm and the clinic's opening hours and closures never meet)")

_said_once: set[str] = set()


class Lines(Protocol):
    """The process's lines, shared with inbound calls (runner/runtime.AppRuntime)."""

    def outbound_has_room(self) -> bool: ...
    def hold_ringing(self, key: str) -> None: ...
    def release_ringing(self, key: str) -> None: ...


@dataclass
class Dispatcher:
    pool: asyncpg.Pool
    settings: Settings
    lines: Lines
    calls: CallPlacer | None
    unavailable: str | None  # why `calls` is None
    clock: Callable[[], datetime]
    pace: DialPace | None = None  # the process's dial rate; None: as fast as the rules allow

    # --- The job ---------------------------------------------------------------

    async def run(self, task_id: str) -> None:
        """Do the task's one next thing; raises RetryRequested to be run again later.
        This job is the task's only alarm clock (while it runs, no other can be queued):
        a task still open after the step has it run again at the task's next time."""
        await self._step(task_id)
        task = await outbound.get_task(self.pool, None, task_id)
        if task is None or task.status not in OPEN_STATUSES:
            return
        if task.status == "in_progress":
            await self._follow_later(task)
        await self._defer(task, (task.next_attempt_at or self.clock()) - self.clock(), why=None)

    async def _step(self, task_id: str) -> None:
        task = await outbound.get_task(self.pool, None, task_id)
        if task is None or task.status not in OPEN_STATUSES:
            return
        if task.status == "in_progress":
            attempt = await dials.latest_attempt(self.pool, task.id)
            if attempt is not None and attempt.status != "ended":
                if attempt.call_sid is None:
                    await self._reconcile(task, attempt)
                else:
                    await self._follow(task, attempt)
                return
            if attempt is not None and attempt.outcome == "answered":
                await self._after_conversation(task, attempt)
                return
            await dials.back_to_pending(self.pool, task.id, why=None)
            task = await outbound.get_task(self.pool, None, task_id)
            if task is None or task.status != "pending":
                return
        await self._dial_when_due(task)

    async def _dial_when_due(self, task: OutboundTask, unplaced: Attempt | None = None) -> None:
        """Dial the task now if every rule allows, else wait for the moment they do.
        `unplaced`: an attempt written but never placed, dialled instead of a new one."""
        now = self.clock()
        if not self.settings.outbound.enabled:
            await self._cannot_dial_yet(task, "outbound calling is turned off "
                                              "(OUTBOUND_ENABLED=false)")
        if unplaced is None and task.attempts_made >= task.max_attempts:
            await outbound.finish_task(self.pool, task.id, outcome=task.outcome or "failed",
                                       status="failed",
                                       detail=f"its {task.max_attempts} attempts are spent")
            return
        callee = await load_callee(self.pool, task)
        number = unplaced.to_number if unplaced is not None else callee.phone
        if not number:
            await outbound.finish_task(self.pool, task.id, outcome="failed", status="failed",
                                       detail="no phone number to call")
            return
        if not await outbound.may_call(self.pool, task.workspace_id,
                                       patient_id=task.patient_id, phone=number):
            await self._call_off(task, unplaced, "opted_out", "the callee asked not to be called")
            return
        if task.kind == "waitlist_offer" and not await offer_still_open(
                self.pool, task.offer or {}, now):
            await self._call_off(task, unplaced, "slot_gone", "the offered slot has gone")
            return
        clinic = await load_clinic(self.pool, task, now)
        if clinic is None:
            await self._cannot_dial_yet(task, "the task names no clinic to call from")
        if clinic.number is None and unplaced is None:
            await self._cannot_dial_yet(task, "the clinic has no phone number to call from")
        recent = await dials.recent_dials(
            self.pool, task.workspace_id, number, now - DAY,
            excluding=unplaced.id if unplaced is not None else None)
        at = earliest_dial(now, task, callee, clinic, recent,
                           self.settings.outbound.max_attempts_per_number_per_day)
        if at is None:
            await self._no_window(task, unplaced)
            return
        if at > now:
            await self._defer(task, at - now, why=None)
        if self.calls is None:
            await self._cannot_dial_yet(task, self.unavailable or "outbound calling is unavailable")
        if not self.lines.outbound_has_room():
            await self._defer(task, timedelta(seconds=self.settings.outbound.capacity_recheck_s),
                              why=None)
        turn = self.pace.wait(task.id, now) if self.pace is not None else timedelta(0)
        if turn > timedelta(0):
            await self._defer(task, turn, why=None)
        attempt = unplaced or await dials.begin_attempt(
            self.pool, task, to_number=number, from_number=clinic.number or "", at=now)
        if attempt is None:
            return  # the task moved meanwhile; its own state says what comes next
        await self._place(task, attempt)

    async def _place(self, task: OutboundTask, attempt: Attempt) -> None:
        """Ask Twilio to place the attempt's call (already committed as `dialing`)."""
        assert self.calls is not None
        base = (self.settings.server.public_url or "").rstrip("/")
        self.lines.hold_ringing(attempt.id)
        try:
            placed = await self.calls.create(
                to=attempt.to_number, from_=attempt.from_number or "",
                url=f"{base}/voice/outbound/answer?attempt={attempt.id}",
                status_callback=f"{base}/voice/outbound/status?attempt={attempt.id}",
                machine_detection=True)
        except TwilioCallError as error:
            self.lines.release_ringing(attempt.id)
            await self._refused(task, attempt, error)
            return
        await dials.progress(self.pool, attempt.id, status=progress_of(placed.status),
                             sid=placed.sid)
        logger.info(f"outbound task {task.id}: attempt {attempt.number} placed")
        await self._follow_later(task)

    async def _refused(self, task: OutboundTask, attempt: Attempt,
                       error: TwilioCallError) -> None:
        if error.status is None:
            # No answer from Twilio: the call may have been placed. The attempt stays
            # unconfirmed and Twilio is asked before any new dial.
            logger.warning(f"outbound task {task.id}: attempt {attempt.number} not confirmed "
                           f"by Twilio ({error}); checking again")
            await self._defer(replace(task, status="in_progress"), UNCONFIRMED_RECHECK, why=(
                f"attempt {attempt.number}: Twilio did not confirm the call ({error}); "
                "checking with Twilio before dialling again"))
        if error.retryable:
            step = await self.next_step(task, attempt, "failed")
        else:
            step = Close("failed", "failed", f"Twilio refused the call: {error}")
        logger.warning(f"outbound task {task.id}: attempt {attempt.number} refused ({error})")
        await self._settle(task, attempt, "failed", f"Twilio refused the call: {error}", step)

    # --- A call whose outcome is not known yet ---------------------------------

    async def _reconcile(self, task: OutboundTask, attempt: Attempt) -> None:
        """An attempt written but not confirmed: adopt the call Twilio placed for it, or
        dial it (once the rules allow) when Twilio placed none."""
        if self.calls is None:
            await self._cannot_dial_yet(task, self.unavailable or "outbound calling is unavailable")
        try:
            found = await self.calls.since(to=attempt.to_number, from_=attempt.from_number or "",
                                           after=attempt.started_at - CLOCK_MARGIN)
        except TwilioCallError as error:
            await self._defer(task, UNCONFIRMED_RECHECK, why=(
                f"cannot check with Twilio whether attempt {attempt.number} was placed "
                f"({error})"))
        taken = await dials.sids_taken(self.pool, [call.sid for call in found])
        ours = [call for call in found if call.sid not in taken]
        if not ours:
            logger.info(f"outbound task {task.id}: attempt {attempt.number} was never placed; "
                        "dialling it")
            await self._dial_when_due(task, unplaced=attempt)
            return
        call = ours[-1]  # newest first: the first placed since the attempt began
        await dials.progress(self.pool, attempt.id, status=progress_of(call.status),
                             sid=call.sid)
        logger.info(f"outbound task {task.id}: attempt {attempt.number} was placed before "
                    "the process stopped; following that call")
        if call.status in TERMINAL:
            adopted = await dials.get_attempt(self.pool, attempt.id)
            await self.call_ended(adopted or attempt, call.status, answered_by=None)
            return
        await self._follow_later(task)

    async def _follow(self, task: OutboundTask, attempt: Attempt) -> None:
        """A placed call still open on our side: ask Twilio whether it is over."""
        if self.calls is not None:
            try:
                found = await self.calls.since(to=attempt.to_number,
                                               from_=attempt.from_number or "",
                                               after=attempt.started_at - CLOCK_MARGIN)
            except TwilioCallError as error:
                logger.warning(f"outbound task {task.id}: call not checked ({error})")
                found = None
            if found is not None:
                call = next((c for c in found if c.sid == attempt.call_sid), None)
                if call is not None and call.status in TERMINAL:
                    await self.call_ended(attempt, call.status, answered_by=None)
                    return
                if call is None and self.clock() - attempt.started_at > FOLLOW_GIVE_UP_AFTER:
                    outcome = attempt.outcome or "failed"
                    await self._settle(task, attempt, outcome, "Twilio no longer lists the call",
                                       await self.next_step(task, attempt, outcome))
                    return
        await self._follow_later(task)

    # --- Outcomes ----------------------------------------------------------------

    async def call_ended(self, attempt: Attempt, status: str, *,
                         answered_by: str | None) -> Attempt | None:
        """Twilio says the attempt's call is over (`status`): end the attempt with its
        outcome and take the task's next step; None when it had already ended."""
        task = await outbound.get_task(self.pool, None, attempt.task_id)
        if task is None:
            return None
        outcome = attempt.outcome or outcome_of(status, answered_by,
                                                reached_us=attempt.call_id is not None)
        detail = f"Twilio: {status}"
        call = await self._answered_call(attempt)
        if outcome == "answered" and call is not None and call.get("connected_at") is None:
            # The person answered but the call never streamed: they never heard us.
            outcome, detail = "failed", f"{detail}; answered, but the call never streamed"
        if answered_by == FAX or attempt.detail.startswith(FAX_ANSWERED):
            step: NextStep = Close("failed", "failed", FAX_ANSWERED)
        elif outcome == "answered" and call is not None and call.get("ended_at") is None:
            step = Keep()  # the call's own end closes the task with what it found
        else:
            step = await self.next_step(task, attempt, outcome)
        return await self._settle(task, attempt, outcome, detail, step)

    async def _answered_call(self, attempt: Attempt) -> dict[str, Any] | None:
        """The record of the attempt's answered call (None: no answer reached us)."""
        if attempt.call_id is None:
            return None
        return await repo.get_call(self.pool, attempt.call_id)

    async def _conversation_open(self, attempt: Attempt) -> bool:
        """The answered call's record is still open (its conversation is finishing)."""
        call = await self._answered_call(attempt)
        return call is not None and call.get("ended_at") is None

    async def _after_conversation(self, task: OutboundTask, attempt: Attempt) -> None:
        """An answered call whose task is still open: once its record is closed (the
        conversation's end did not close the task), the task is done, answered."""
        if await self._conversation_open(attempt):
            return  # looked at again on the next follow-up
        await outbound.finish_task(self.pool, task.id, outcome="answered", status="done",
                                   detail="the call ended without closing the task")

    async def next_step(self, task: OutboundTask, attempt: Attempt, outcome: str) -> NextStep:
        """After an attempt ended `outcome`: done when answered; a waitlist offer whose
        slot went meanwhile is called off; another try after the task's backoff (doubling
        each attempt, capped) and in a calling window while it has attempts left; else
        failed with that outcome."""
        number = max(attempt.number, task.attempts_made)
        if outcome not in NOT_REACHED:
            return Close("done", outcome)
        if task.kind == "waitlist_offer" and not await offer_still_open(
                self.pool, task.offer or {}, self.clock()):
            return Close("cancelled", "slot_gone", f"{SAID.get(outcome, outcome)}; "
                                                   "the offered slot has gone meanwhile")
        if number >= task.max_attempts:
            return Close("failed", outcome,
                         f"{SAID.get(outcome, outcome)} on the last of {number} attempts")
        now = self.clock()
        backoff = timedelta(minutes=min(task.retry_backoff_minutes * 2 ** (number - 1),
                                        self.settings.outbound.max_retry_backoff_minutes))
        later = _at_least(task, now + backoff)
        clinic = await load_clinic(self.pool, task, now)
        at = (earliest_dial(now, later, await load_callee(self.pool, task), clinic, (),
                            self.settings.outbound.max_attempts_per_number_per_day)
              if clinic is not None else later.next_attempt_at)
        if at is None:
            return Close("failed", outcome, f"{SAID.get(outcome, outcome)}; {NO_WINDOW}")
        return Retry(at, at - now, f"attempt {number}: {SAID.get(outcome, outcome)}; "
                                   f"next try at {at:%Y-%m-%d %H:%M %Z}")

    async def _settle(self, task: OutboundTask, attempt: Attempt, outcome: str, detail: str,
                      step: NextStep) -> Attempt | None:
        ended = await dials.settle(self.pool, attempt, outcome=outcome, detail=detail,
                                   at=self.clock(), step=step, priority=task.priority)
        if ended is None:
            return None
        self.lines.release_ringing(attempt.id)
        if isinstance(step, Close) and step.status == "failed":
            logger.warning(f"outbound task {task.id} failed: {step.why or step.outcome}")
        elif isinstance(step, Keep):
            logger.info(f"outbound task {task.id}: attempt {attempt.number} answered; the "
                        "conversation closes the task")
            return ended
        else:
            logger.info(f"outbound task {task.id}: attempt {attempt.number} ended "
                        f"{ended.outcome}")
        if ended.call_id is not None:
            await dials.note_on_unstreamed_call(self.pool, ended.call_id, "outbound_outcome", {
                "task_id": task.id, "attempt": attempt.number, "outcome": ended.outcome,
                "next": (step.at.isoformat() if isinstance(step, Retry)
                         else f"task {step.status}")})
        return ended

    # --- Waiting -------------------------------------------------------------------

    async def _defer(self, task: OutboundTask, delay: timedelta, *,
                     why: str | None) -> NoReturn:
        """Run this task's job again `delay` from now, saying when (and why, when it is not
        simply the time) on the task."""
        delay = max(delay, timedelta(seconds=1))
        if task.status == "pending":
            await dials.wait(self.pool, task.id, until=self.clock() + delay, why=why)
        else:
            await dials.wait(self.pool, task.id, until=None, why=why)
        await dials.fresh_retries(self.pool, task.id)
        raise RetryRequested(delay=delay, reason=why or "not yet")

    async def _follow_later(self, task: OutboundTask) -> NoReturn:
        await dials.fresh_retries(self.pool, task.id)
        raise RetryRequested(delay=timedelta(seconds=self.settings.outbound.follow_up_s),
                             reason="following the call")

    async def _cannot_dial_yet(self, task: OutboundTask, why: str) -> NoReturn:
        """Outbound calling cannot work yet (set-up missing): the task waits and says why;
        the log says it once."""
        if why not in _said_once:
            _said_once.add(why)
            logger.warning(f"outbound tasks wait: {why}")
        await self._defer(task, timedelta(seconds=self.settings.outbound.unavailable_recheck_s),
                          why=why)

    async def _call_off(self, task: OutboundTask, unplaced: Attempt | None, outcome: str,
                        why: str) -> None:
        """The call is no longer wanted: the task is cancelled with `outcome`, never dialled
        (an attempt written but not placed ends with it)."""
        logger.info(f"outbound task {task.id}: {why}; cancelled")
        if unplaced is not None:
            await self._settle(task, unplaced, outcome, f"not placed: {why}",
                               Close("cancelled", outcome))
        else:
            await dials.call_off(self.pool, task.id, outcome)

    async def _no_window(self, task: OutboundTask, unplaced: Attempt | None) -> None:
        if unplaced is not None:
            await self._settle(task, unplaced, "failed", f"not placed: {NO_WINDOW}",
                               Close("failed", "failed", NO_WINDOW))
        else:
            await outbound.finish_task(self.pool, task.id, outcome="failed", status="failed",
                                       detail=NO_WINDOW)
            logger.warning(f"outbound task {task.id} failed: no calling window")


def _at_least(task: OutboundTask, at: datetime) -> OutboundTask:
    """The task as if its next try were not before `at`."""
    return replace(task, next_attempt_at=max(at, task.next_attempt_at or at))


def dispatcher_for(runtime: AppRuntime) -> Dispatcher:
    calls, why = twilio_calls(runtime.settings)
    return Dispatcher(runtime.db.pool, runtime.settings, runtime, calls, why, runtime.clock,
                      runtime.dial_pace)


async def outbound_dial(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    """The `outbound_dial` job: payload {"task_id"}."""
    task_id = str(payload.get("task_id") or "")
    if not task_id:
        logger.warning("outbound_dial job without a task id; nothing to do")
        return
    await dispatcher_for(runtime).run(task_id)


__all__ = ["Dispatcher", "Lines", "dispatcher_for", "outbound_dial"]
