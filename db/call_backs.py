"""A call back the clinic promises: the request for the team and the task that dials
it, written together, and when the call will come.

Every place the agent offers to call someone back goes through `request_call_back` (the
EscalateToHuman tool, the responder that answers when there is no LLM, the offer at a
call's time limit), so "we'll call you back" is said only when its task was written,
and always with the time the dispatcher will use. No task (no number to call, they
asked not to be called, or the write failed): the request may still be on record for
the team, but no call is promised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from db import outbound, scheduling
from db.deadline import within
from db.promised_calls import Callee, CallPlan, plan_call

# Callback task priorities (1-10): a red flag's urgent call back first.
CALLBACK_PRIORITY, URGENT_PRIORITY, RED_FLAG_PRIORITY = 5, 9, 10
REQUEST_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Caller:
    """The person on the call, as far as the call knows them."""

    workspace_id: str | None
    call_id: str | None
    caller_number: str | None  # the number they call from
    callee: Callee  # the clinic and the patient, for the plan
    callback_phone: str | None = None  # a number they gave for the call back

    @property
    def patient_id(self) -> str | None:
        return self.callee.patient_id

    @property
    def dial(self) -> str | None:
        """The number the task dials: the one they gave, else the one they call from when
        there is no patient record to find a number in."""
        return self.callback_phone or (None if self.patient_id else self.caller_number)


@dataclass(frozen=True)
class CallBackAsk:
    """What the team is asked to call back about."""

    reason: str
    message: str = ""
    urgent: bool = False
    priority: int = CALLBACK_PRIORITY
    written_by: str = "system"


@dataclass(frozen=True)
class CallBack:
    """What came of a request: `task_id` None means no call back is promised (`why_not`
    says why when it was refused rather than failed)."""

    request_id: str | None
    task_id: str | None
    plan: CallPlan
    why_not: str | None = None

    @property
    def promised(self) -> bool:
        return self.task_id is not None


async def why_no_call_back(pool: asyncpg.Pool, caller: Caller) -> str | None:
    """Why no call back can be promised (None: one can)."""
    if not caller.workspace_id or (caller.patient_id is None and not caller.dial):
        return "there is no number to call them back on"
    if not await outbound.may_call(pool, caller.workspace_id, patient_id=caller.patient_id,
                                   phone=caller.dial or caller.caller_number):
        return "they asked not to be called, so no call back can be arranged"
    return None


async def request_call_back(pool: asyncpg.Pool, caller: Caller, ask: CallBackAsk,
                            now: datetime) -> CallBack:
    """Log the request for the clinic team and, unless one cannot be made, the callback
    task dialled in the next calling window, in one transaction. Raises when the
    database fails: nothing is then written, and nothing may be promised."""
    plan = await plan_call(pool, caller.callee, now)
    why_not = await why_no_call_back(pool, caller)
    task = None if why_not else outbound.TaskSpec(
        workspace_id=str(caller.workspace_id), service_id=caller.callee.service_id or None,
        kind="callback", reason=ask.reason, goal=ask.message or ask.reason,
        timezone=plan.timezone, not_before=plan.not_before(now), priority=ask.priority,
        patient_id=caller.patient_id, phone=caller.dial, window_start=plan.window.start,
        window_end=plan.window.end, window_days=plan.window.days, written_by=ask.written_by,
        confidence="high", source_call=caller.call_id)
    request_id, task_id = await scheduling.request_callback(
        pool, service_id=caller.callee.service_id, call_id=caller.call_id,
        patient_id=caller.patient_id, phone=caller.callback_phone or caller.caller_number,
        reason=ask.reason, message=ask.message, urgent=ask.urgent, task=task,
    )
    return CallBack(request_id, task_id, plan, why_not)


class CallBacks:
    """One call's way to ask for a call back, for the parts of the pipeline that are not
    the conversation's tools (the no-LLM responder, the time limit): bound to the
    database and to whoever the call has identified so far (`caller`, read at the time
    of asking). A request is bounded (`timeout_s`, even on a frozen database): the
    caller is waiting on the line for the answer."""

    def __init__(self, pool: asyncpg.Pool, caller: Callable[[], Caller], *,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._pool = pool
        self._caller = caller
        self.now = now
        self._timeout_s = timeout_s

    async def request(self, ask: CallBackAsk) -> CallBack:
        """The request and its task, or an error (nothing promised)."""
        return await within(request_call_back(self._pool, self._caller(), ask, self.now()),
                            self._timeout_s, what="call back request")
