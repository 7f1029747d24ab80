"""Outbound tasks over HTTP: every call the clinic owes someone, its attempts and how each
ended, with the call records linked; a task made by hand, cancelled, tried again, or
claimed by a person who will make the call themselves instead of the dialer.

Reads need any key; creating, cancelling, retrying and claiming need an operator. A task
of another workspace, an unknown id and a malformed one all answer 404. A task that is
not in a state an action allows answers 409 with the reason. Every change goes through
`db.outbound` (a task exists exactly with its dial job); what is shown beside a task is
read by `db.task_views`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Depends, HTTPException, Query, status
from loguru import logger
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from call.voice_settings import PlainText
from db import control, outbound, task_views
from db import repositories as repo
from runner.runtime import AppRuntime

TaskStatus = Literal["pending", "in_progress", "claimed", "done", "failed", "cancelled"]
TaskKind = Literal["scheduled", "callback", "waitlist_offer", "reminder", "checkin"]
# A waitlist offer carries a freed slot: it is made when a slot frees, never by hand.
NewTaskKind = Literal["callback", "scheduled", "checkin", "reminder"]
MAX_AHEAD = timedelta(days=366)  # the latest a new task may first be dialled
Words = Annotated[PlainText, Field(min_length=3, max_length=500)]
OPEN = "a pending or in-progress task"


class ErrorOut(BaseModel):
    detail: str


def _answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {404: "No such task (or patient, clinic, appointment) in this workspace",
               409: "The task (or the patient) is not in a state that allows this; the "
                    "detail says why"}
    return {code: {"model": ErrorOut, "description": meaning[code]} for code in codes}


router = APIRouter(prefix="/api/tasks", tags=["outbound tasks"], responses=AUTH_RESPONSES)
read_only = require_role(Role.READ_ONLY)
operator = require_role(Role.OPERATOR)


# --- Models ------------------------------------------------------------------------


class Window(BaseModel):
    """When the task may be dialled, in the callee's timezone (the patient's own hours,
    8 am to 9 pm, and the clinic's opening hours apply on top)."""

    model_config = ConfigDict(extra="forbid")

    start: time = Field(default=time(9), description="Local time, e.g. 09:00")
    end: time = Field(default=time(17), description="Local time after `start`")
    days: list[Annotated[int, Field(ge=0, le=6)]] = Field(
        default=[0, 1, 2, 3, 4], min_length=1, max_length=7, description="0 = Monday")

    @field_validator("start", "end")
    @classmethod
    def _local(cls, value: time) -> time:
        if value.tzinfo is not None:
            raise ValueError("a local time, without an offset")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if self.end <= self.start:
            raise ValueError("the window ends after it starts")
        self.days = sorted(set(self.days))
        return self


class TaskOut(BaseModel):
    id: str
    kind: TaskKind
    status: TaskStatus
    outcome: str | None = Field(description="answered, voicemail, no_answer, busy, failed, "
                                            "opted_out, wrong_person, slot_gone or claimed")
    reason: str
    goal: str
    priority: int = Field(description="1 (lowest) to 10 (most urgent)")
    patient_id: str | None
    patient_name: str | None
    phone: str | None = Field(description="The number the dialer calls")
    clinic_id: str | None
    clinic_timezone: str | None = Field(description="For showing times as the clinic reads them")
    timezone: str = Field(description="The callee's timezone, in which `window` is read")
    window: Window
    not_before: datetime
    next_attempt_at: datetime | None = Field(description="When the dialer next tries (null: "
                                                         "it will not)")
    attempts_made: int
    max_attempts: int
    claimed_by: str | None
    claimed_at: datetime | None
    last_error: str | None
    source_call: str | None = Field(description="The call the task was promised on")
    written_by: str
    created_at: datetime
    updated_at: datetime


class AttemptOut(BaseModel):
    number: int
    started_at: datetime
    ended_at: datetime | None
    status: str = Field(description="dialing, ringing, in_progress, ended or unknown")
    outcome: str | None = Field(description="answered, voicemail, no_answer, busy, failed "
                                            "or opted_out")
    detail: str
    call_id: str | None
    call_url: str | None = Field(description="The attempt's call record (GET)")


class CallbackRequestOut(BaseModel):
    reason: str
    message: str
    urgent: bool
    status: str
    call_id: str | None
    created_at: datetime


class SlotOut(BaseModel):
    starts_at: str | None
    ends_at: str | None
    practitioner: str | None
    location: str | None
    appointment_type: str | None
    timezone: str | None


class AppointmentOut(BaseModel):
    id: str
    starts_at: datetime
    ends_at: datetime
    status: str
    appointment_type: str
    practitioner: str
    location: str
    timezone: str


class TaskDetail(TaskOut):
    attempts: list[AttemptOut] = Field(description="First first")
    source_call_url: str | None
    callback_request: CallbackRequestOut | None = Field(
        description="The request a callback returns: why, the caller's message, urgency")
    offer: SlotOut | None = Field(description="The slot a waitlist offer offers")
    appointment: AppointmentOut | None = Field(description="The appointment a reminder is about")


class TaskPage(BaseModel):
    tasks: list[TaskOut] = Field(description="Newest first")
    next_before: datetime | None = Field(
        description="Pass as `before` for the next (older) page; null: no more")


class Summary(BaseModel):
    total: int
    by_status: dict[str, int]
    by_outcome: dict[str, int] = Field(description="Tasks by how they ended")
    attempts_by_outcome: dict[str, int] = Field(description="Dial attempts by how they ended")


class NewTask(BaseModel):
    """A task made by hand for a patient of the workspace."""

    model_config = ConfigDict(extra="forbid")

    patient_id: uuid.UUID
    kind: NewTaskKind = "callback"
    reason: Words = Field(description="Why the clinic calls (the callee may hear it)")
    goal: Words = Field(description="What the call should achieve")
    priority: int = Field(default=5, ge=1, le=10)
    clinic_id: uuid.UUID | None = Field(
        default=None, description="The clinic calling; may be left out when the workspace "
                                  "has one clinic")
    appointment_id: uuid.UUID | None = Field(
        default=None, description="The patient's appointment a reminder is about (required "
                                  "for a reminder)")
    not_before: AwareDatetime | None = Field(
        default=None, description="The earliest it may be dialled (default: now)")
    window: Window = Field(default_factory=Window)
    max_attempts: int = Field(default=3, ge=1, le=10)

    @model_validator(mode="after")
    def _complete(self) -> NewTask:
        if self.kind == "reminder" and self.appointment_id is None:
            raise ValueError("a reminder names the appointment it is about (appointment_id)")
        if self.not_before is not None and self.not_before - datetime.now(UTC) > MAX_AHEAD:
            raise ValueError("not_before is at most a year ahead")
        return self


# --- Helpers -------------------------------------------------------------------------


def _not_found(what: str = "task not found") -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, what)


def _conflict(reason: str) -> HTTPException:
    return HTTPException(status.HTTP_409_CONFLICT, reason)


def _in_utc(moment: datetime | None) -> datetime | None:
    """`moment` in UTC (a time without an offset is read as UTC); 422 for one so near the
    ends of the calendar that it has no UTC time."""
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except OverflowError:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            "before: that time has no UTC equivalent") from None


def _call_url(call_id: str | None) -> str | None:
    return f"/api/calls/{call_id}" if call_id else None


def _task_out(view: task_views.TaskView) -> dict[str, Any]:
    task = view.task
    return {
        "id": task.id, "kind": task.kind, "status": task.status, "outcome": task.outcome,
        "reason": task.reason, "goal": task.goal, "priority": task.priority,
        "patient_id": task.patient_id, "patient_name": view.patient_name, "phone": view.phone,
        "clinic_id": task.service_id, "clinic_timezone": view.clinic_timezone,
        "timezone": task.timezone,
        "window": {"start": task.window_start, "end": task.window_end,
                   "days": list(task.window_days)},
        "not_before": task.not_before, "next_attempt_at": task.next_attempt_at,
        "attempts_made": task.attempts_made, "max_attempts": task.max_attempts,
        "claimed_by": task.claimed_by, "claimed_at": task.claimed_at,
        "last_error": task.last_error, "source_call": task.source_call,
        "written_by": task.written_by, "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


async def _detail(runtime: AppRuntime, caller: Caller, task_id: str) -> dict[str, Any]:
    pool = runtime.db.pool

    async def work() -> dict[str, Any] | None:
        view = await task_views.task_view(pool, caller.workspace_id, task_id)
        if view is None:
            return None
        task = view.task
        tries = await outbound.attempts(pool, task.id)
        return {
            **_task_out(view),
            "attempts": [{"number": a.number, "started_at": a.started_at,
                          "ended_at": a.ended_at, "status": a.status, "outcome": a.outcome,
                          "detail": a.detail, "call_id": a.call_id,
                          "call_url": _call_url(a.call_id)} for a in tries],
            "source_call_url": _call_url(task.source_call),
            "callback_request": task.callback_request_id and await task_views.callback_request(
                pool, task.callback_request_id),
            "offer": task.offer and await task_views.offer_slot(pool, task.offer),
            "appointment": task.appointment_id and await task_views.appointment(
                pool, task.appointment_id),
        }

    detail = await runtime.db.bounded(work(), what="task read")
    if detail is None:
        raise _not_found()
    return detail


# --- Reads ---------------------------------------------------------------------------


@router.get("", response_model=TaskPage)
async def list_tasks(
    status_: TaskStatus | None = Query(default=None, alias="status"),
    kind: TaskKind | None = Query(default=None),
    patient_id: uuid.UUID | None = Query(default=None),
    limit: int = Query(default=50, ge=1, le=repo.MAX_LIST_LIMIT),
    before: datetime | None = Query(default=None, description="Only tasks created before "
                                                              "this (`next_before`)"),
    caller: Caller = Depends(read_only), runtime: AppRuntime = Depends(get_runtime),
) -> dict[str, Any]:
    """The workspace's tasks, newest first, one page at a time (tasks created at the same
    moment are kept on one page)."""
    views, next_before = await runtime.db.bounded(task_views.task_page(
        runtime.db.pool, caller.workspace_id, status=status_, kind=kind,
        patient_id=str(patient_id) if patient_id else None, limit=limit,
        before=_in_utc(before)),
        what="task list")
    return {"tasks": [_task_out(view) for view in views], "next_before": next_before}


@router.get("/summary", response_model=Summary)
async def task_summary(kind: TaskKind | None = Query(default=None),
                       caller: Caller = Depends(read_only),
                       runtime: AppRuntime = Depends(get_runtime)) -> Summary:
    """How many tasks are in each status and ended each way, and how the dial attempts
    ended (every status and outcome listed, zero included)."""
    counts = await runtime.db.bounded(
        task_views.summary(runtime.db.pool, caller.workspace_id, kind=kind),
        what="task summary")
    return Summary(total=sum(counts.by_status.values()), by_status=counts.by_status,
                   by_outcome=counts.by_outcome, attempts_by_outcome=counts.attempts_by_outcome)


@router.get("/{task_id}", response_model=TaskDetail, responses=_answers(404))
async def get_task(task_id: str, caller: Caller = Depends(read_only),
                   runtime: AppRuntime = Depends(get_runtime)) -> dict[str, Any]:
    """One task with its attempts (each linked to its call record) and where it came from:
    the call it was promised on, the callback request, the waitlist slot, the appointment."""
    return await _detail(runtime, caller, task_id)


# --- Changes -------------------------------------------------------------------------


async def _clinic_for(conn: asyncpg.Connection, workspace_id: str,
                      clinic_id: uuid.UUID | None) -> str | None:
    """The clinic a new task calls from: the one named, else the workspace's only one."""
    if clinic_id is not None:
        if await control.get_service(conn, workspace_id, str(clinic_id)) is None:
            raise _not_found("clinic not found")
        return str(clinic_id)
    clinics = await task_views.workspace_clinics(conn, workspace_id)
    if len(clinics) > 1:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            f"this workspace has {len(clinics)} clinics: name the one that "
                            "calls (clinic_id)")
    return clinics[0] if clinics else None


@router.post("", response_model=TaskDetail, status_code=status.HTTP_201_CREATED,
             responses=_answers(404, 409))
async def create_task(body: NewTask, caller: Caller = Depends(operator),
                      runtime: AppRuntime = Depends(get_runtime)) -> dict[str, Any]:
    """A task for a patient of the workspace, with its dial job queued for `not_before`
    (or now). A patient who asked not to be called is refused (409)."""
    workspace_id = caller.workspace_id

    async def create(conn: asyncpg.Connection) -> str:
        patient = await task_views.callee(conn, workspace_id, str(body.patient_id))
        if patient is None:
            raise _not_found("patient not found")
        if not patient.phone:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                                "the patient has no phone number on record to call")
        if not await outbound.may_call(conn, workspace_id, patient_id=patient.id,
                                       phone=patient.phone):
            raise _conflict("the patient asked not to be called")
        service_id = await _clinic_for(conn, workspace_id, body.clinic_id)
        if body.appointment_id is not None and not await task_views.patient_appointment(
                conn, patient.id, str(body.appointment_id)):
            raise _not_found("appointment not found")
        zone = patient.timezone or (
            service_id and await task_views.clinic_timezone(conn, service_id)) or "UTC"
        now = datetime.now(UTC)
        try:
            return await outbound.create_task(conn, outbound.TaskSpec(
                workspace_id=workspace_id, service_id=service_id, kind=body.kind,
                reason=body.reason, goal=body.goal, timezone=zone,
                not_before=max(now, body.not_before or now), priority=body.priority,
                patient_id=patient.id, window_start=body.window.start,
                window_end=body.window.end, window_days=tuple(body.window.days),
                max_attempts=body.max_attempts, written_by=caller.actor,
                appointment_id=str(body.appointment_id) if body.appointment_id else None))
        except asyncpg.UniqueViolationError:
            raise _conflict("this appointment already has a reminder task") from None

    task_id = await in_transaction(runtime, create, what="task create")
    logger.info(f"outbound task {task_id} ({body.kind}) created by {caller.actor}")
    return await _detail(runtime, caller, task_id)


async def _why_not(pool: asyncpg.Pool, workspace_id: str, task_id: str, allowed: str,
                   verb: str) -> HTTPException:
    """Why an action did not apply: 404 for no such task, else 409 naming its state."""
    task = await outbound.get_task(pool, workspace_id, task_id)
    if task is None:
        return _not_found()
    state = task.status.replace("_", " ")
    return _conflict(f"the task is {state}: only {allowed} can be {verb}")


async def _act(runtime: AppRuntime, caller: Caller, task_id: str, verb: str,
               action: Callable[[], Awaitable[HTTPException | None]]) -> dict[str, Any]:
    """Run `action` (its refusal, or None once done), then answer the task as it is."""
    refusal = await runtime.db.bounded(action(), what=f"task {verb}")
    if refusal is not None:
        raise refusal
    logger.info(f"outbound task {task_id} {verb} by {caller.actor}")
    return await _detail(runtime, caller, task_id)


@router.post("/{task_id}/cancel", response_model=TaskDetail, responses=_answers(404, 409))
async def cancel_task(task_id: str, caller: Caller = Depends(operator),
                      runtime: AppRuntime = Depends(get_runtime)) -> dict[str, Any]:
    """Cancel an open task: its dial job is taken away."""
    pool, workspace_id = runtime.db.pool, caller.workspace_id

    async def cancel() -> HTTPException | None:
        if await outbound.cancel_task(pool, workspace_id, task_id):
            return None
        return await _why_not(pool, workspace_id, task_id, OPEN, "cancelled")

    return await _act(runtime, caller, task_id, "cancelled", cancel)


@router.post("/{task_id}/claim", response_model=TaskDetail, responses=_answers(404, 409))
async def claim_task(task_id: str, caller: Caller = Depends(operator),
                     runtime: AppRuntime = Depends(get_runtime)) -> dict[str, Any]:
    """A person will make this call themselves: the dialer will not, and the task names
    the key that claimed it."""
    pool, workspace_id = runtime.db.pool, caller.workspace_id

    async def claim() -> HTTPException | None:
        if await outbound.claim_task(pool, workspace_id, task_id, actor=caller.actor):
            return None
        return await _why_not(pool, workspace_id, task_id, OPEN, "claimed")

    return await _act(runtime, caller, task_id, "claimed", claim)


@router.post("/{task_id}/retry", response_model=TaskDetail, responses=_answers(404, 409))
async def retry_task(task_id: str, caller: Caller = Depends(operator),
                     runtime: AppRuntime = Depends(get_runtime)) -> dict[str, Any]:
    """Try a failed or cancelled task again from now, with one more attempt allowed. A
    callee who asked not to be called is not called again (409)."""
    pool, workspace_id = runtime.db.pool, caller.workspace_id

    async def retry() -> HTTPException | None:
        view = await task_views.task_view(pool, workspace_id, task_id)
        if view is None:
            return _not_found()
        if not await outbound.may_call(pool, workspace_id, patient_id=view.task.patient_id,
                                       phone=view.phone):
            return _conflict("the callee asked not to be called: the task is not tried again")
        if await outbound.retry_task(pool, workspace_id, task_id):
            return None
        return await _why_not(pool, workspace_id, task_id, "a failed or cancelled task",
                              "retried")

    return await _act(runtime, caller, task_id, "retried", retry)
