"""Read API for call records: the history (filtered, cursor-paged) and one call's detail.

API key required; a key only ever sees its own workspace's calls (another workspace's
call is "not found", like an id that is not a UUID).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, status
from pydantic import BaseModel, Field, model_validator

from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from api.recordings import without_recording_path
from db import call_analyses
from db import repositories as repo
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/calls", tags=["calls"])

ToolErrorFilter = Literal["true", "false", "guard", "pms", "conflict", "timeout", "other"]
# Text filters are compared in PostgreSQL, which refuses a NUL in text: 422, not a 500.
NO_NUL = r"^[^\x00]*$"


# --- Response models ---------------------------------------------------------------


class CallFields(BaseModel):
    """The `calls` columns the history and the detail both show."""

    id: str
    service_id: str | None = None
    call_sid: str | None = None
    direction: str
    status: str
    started_at: datetime
    connected_at: datetime | None = None
    ended_at: datetime | None = None
    duration_s: float | None = None
    completion_reason: str | None = None
    final_state: str | None = None
    has_recording: bool = Field(default=False, description="A recording was saved.")
    recording_url: str | None = Field(
        default=None, description="The stereo WAV (API key required); null without a recording.")
    transcript_accuracy: float | None = Field(
        default=None, description="1 - WER of the real-time transcript against the verified one."
    )


    @model_validator(mode="before")
    @classmethod
    def _public_recording(cls, row: Any) -> Any:
        """A call row's recording as whether there is one and its URL, never its path."""
        return without_recording_path(row) if isinstance(row, dict) else row


class CallSummary(CallFields):
    """One call in the history."""

    quality_score: float | None = Field(
        default=None, description="The call's quality, 1-5 (the mean of its five scores); "
        "null until the call is analysed.")
    turn_count: int = Field(description="Turns recorded (caller and agent).")
    escalated: bool = Field(description="The safety monitor escalated at least once.")
    tool_errors: int = Field(description="Tool calls that failed (any error class).")


class CallPage(BaseModel):
    calls: list[CallSummary]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page."
    )


class WordTiming(BaseModel):
    """A word as heard (STT) or spoken (TTS), on the recording's clock. Lenient: the
    providers' extra fields (speaker, confidence) pass through, and a stored entry
    missing one never turns a call's detail into an error."""

    model_config = {"extra": "allow"}

    word: str | None = None
    start_ms: int | float | None = None
    end_ms: int | float | None = None


class TurnOut(BaseModel):
    """One turn with the 5-layer timing model (ms from the call's start): the caller's
    speech, the engine, navigation, rendering, the audio's first byte, the agent's speech."""

    seq: int
    speaker_id: str
    speaker_role: str
    text: str
    interrupted: bool
    user_speech_start_ms: int | None = None
    user_speech_end_ms: int | None = None
    engine_ms: int | None = None
    nav_ms: int | None = None
    render_ms: int | None = None
    audio_ttfb_ms: int | None = None
    agent_speech_start_ms: int | None = None
    agent_speech_end_ms: int | None = None
    emotion: str | None = None
    valence: float | None = None
    arousal: float | None = None
    tone: str | None = None
    words: list[WordTiming] | None = None


class TransitionOut(BaseModel):
    seq: int
    previous_state: str | None = None
    next_state: str
    reason: str | None = None
    at_ms: int | None = None


class ToolCallOut(BaseModel):
    tool_call_id: str
    name: str
    input: Any = None
    output: Any = None
    started_ms: int | None = None
    duration_ms: int | None = None
    succeeded: bool | None = None
    error_class: str | None = Field(default=None, description="guard, pms, conflict, timeout or other")
    error_message: str | None = None


class EventOut(BaseModel):
    seq: int
    type: str
    data: Any = Field(default_factory=dict, description="The event's fields (JSON)")
    at_ms: int | None = None


class EscalationOut(BaseModel):
    seq: int
    concept: str
    severity: Literal["hard", "soft"]
    similarity: float | None = None
    judge: str | None = None
    reason: str | None = None
    at_ms: int | None = None
    status: Literal["open", "acknowledged", "resolved"]
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    resolved_at: datetime | None = None


class SafetyState(BaseModel):
    """Where the call stands with the safety monitor, derived from its escalations."""

    status: Literal["clear", "flagged", "suspended", "acknowledged", "resolved"] = Field(
        description="clear: no escalation; flagged: soft ones only; suspended: an open "
        "hard escalation (the agent stopped, a person is needed); acknowledged: every hard "
        "one seen by a person, not all resolved; resolved: every hard one resolved."
    )
    agent_suspended: bool = Field(description="A hard escalation took the call from the agent.")
    needs_operator: bool = Field(description="An open hard escalation awaits a person.")
    open_escalations: int
    hard_escalations: int
    soft_escalations: int
    last_concept: str | None = None


class SummaryLine(BaseModel):
    """One line of a call's summary and the turns (`seq`) it comes from."""

    text: str
    turns: list[int] = Field(default_factory=list)
    kind: str | None = Field(default=None, description="What sort of thing: booked, "
                             "callback, health, safety, dissatisfaction, ...")
    task: str | None = None
    recap: str | None = Field(default=None, description="As the caller would hear it later.")


class CallSummaryText(BaseModel):
    """What the call was about, for the clinic to read."""

    wanted: list[SummaryLine] = Field(default_factory=list,
                                      description="What the caller wanted.")
    done: list[SummaryLine] = Field(default_factory=list, description="What was done.")
    left_for_person: list[SummaryLine] = Field(
        default_factory=list, description="What a person at the clinic still has to do.")
    concerns: list[SummaryLine] = Field(default_factory=list,
                                        description="Health, safety, dissatisfaction.")
    unresolved: list[SummaryLine] = Field(
        default_factory=list, description="Wanted, and neither done nor handed on.")


class DimensionScore(BaseModel):
    score: int = Field(ge=1, le=5)
    reason: str
    turns: list[int] = Field(default_factory=list)


class QualityOut(BaseModel):
    """Five dimensions, 1 (bad) to 5 (good), each with its reason and turns."""

    task_completion: DimensionScore
    information_accuracy: DimensionScore
    conversation_flow: DimensionScore
    error_recovery: DimensionScore
    caller_experience: DimensionScore


class AnalysisOut(BaseModel):
    """The call's after-call analysis."""

    analyst: str = Field(description="`rules`, or the fast model (`model:google`, ...).")
    fallback: str | None = Field(default=None, description="Why the model's analysis was "
                                 "not kept (the rules' is shown instead).")
    summary: CallSummaryText
    quality: QualityOut
    quality_score: float = Field(ge=1, le=5, description="The mean of the five scores.")
    duration_ms: int
    analysed_at: datetime


class QualityWeekOut(BaseModel):
    week_start: datetime = Field(description="Monday 00:00 UTC.")
    calls: int
    average: float
    low: int = Field(description="Calls scoring under `low_below`.")
    dimensions: dict[str, float]


class CallDetail(CallFields):
    """One call: its record, children in order, and what was derived from them."""

    workspace_id: str | None = None
    twilio_status: str | None = None
    twilio_duration_s: int | None = None
    config_snapshot: Any = Field(default_factory=dict, description="Providers, graph, "
                                 "settings the call ran with (JSON object)")
    emotional_summary: Any = Field(default=None, description="JSON object, or null")
    verified_transcript: str | None = None
    verified_words: list[WordTiming] | None = None
    transcript_verified_at: datetime | None = None
    transcript_verifier: str | None = None
    turns: list[TurnOut]
    transitions: list[TransitionOut]
    tool_calls: list[ToolCallOut]
    events: list[EventOut]
    escalations: list[EscalationOut]
    safety: SafetyState
    analysis: AnalysisOut | None = Field(
        default=None, description="Summary and quality score; null until analysed.")


# --- Logic -------------------------------------------------------------------------


def safety_state(escalations: list[dict[str, Any]], events: list[dict[str, Any]]) -> SafetyState:
    """The call's safety standing: a hard escalation suspends the agent until a person
    resolves it; soft ones only flag the call."""
    hard = [e for e in escalations if e.get("severity") == "hard"]
    soft = [e for e in escalations if e.get("severity") == "soft"]
    suspended = bool(hard) or any(e.get("type") == "agent_suspended" for e in events)
    open_hard = [e for e in hard if e.get("status") == "open"]
    if open_hard or (suspended and not hard):
        state = "suspended"
    elif hard and all(e.get("status") == "resolved" for e in hard):
        state = "resolved"
    elif hard:
        state = "acknowledged"
    else:
        state = "flagged" if soft else "clear"
    return SafetyState(
        status=state,
        agent_suspended=suspended,
        needs_operator=state == "suspended",
        open_escalations=sum(1 for e in escalations if e.get("status") == "open"),
        hard_escalations=len(hard),
        soft_escalations=len(soft),
        last_concept=escalations[-1]["concept"] if escalations else None,
    )


def history_filters(
    started_after: datetime | None, started_before: datetime | None, state: str | None,
    status_: str | None, completion_reason: str | None, escalated: bool | None,
    tool_error: ToolErrorFilter | None, quality_below: float | None = None,
) -> repo.CallFilters:
    """The query's filters from the request's parameters."""
    tool: bool | str | None = tool_error
    if tool_error in ("true", "false"):
        tool = tool_error == "true"
    return repo.CallFilters(
        started_after=started_after, started_before=started_before, final_state=state,
        status=status_, completion_reason=completion_reason, escalated=escalated,
        tool_error=tool, quality_below=quality_below,
    )


# --- Routes ------------------------------------------------------------------------


@router.get("", response_model=CallPage, responses={
    **AUTH_RESPONSES, 400: {"description": "A cursor this server did not issue"}})
async def list_calls(
    limit: int = Query(default=50, ge=1, le=repo.MAX_LIST_LIMIT),
    cursor: str | None = Query(default=None, max_length=512,
                               description="`next_cursor` of the previous page"),
    started_after: datetime | None = Query(default=None, description="Started at or after"),
    started_before: datetime | None = Query(default=None, description="Started before"),
    state: str | None = Query(default=None, max_length=100, pattern=NO_NUL,
                              description="Final state"),
    status_: str | None = Query(default=None, alias="status", max_length=50, pattern=NO_NUL),
    completion_reason: str | None = Query(default=None, max_length=100, pattern=NO_NUL),
    escalated: bool | None = Query(default=None, description="Has (no) escalation"),
    tool_error: ToolErrorFilter | None = Query(
        default=None, description="true/false: has (no) failed tool call; or one error class"),
    quality_below: float | None = Query(
        default=None, ge=1, le=5, description="Analysed calls scoring under this (1-5)"),
    sort: Literal["newest", "worst"] = Query(
        default="newest", description="newest first, or worst: the analysed calls by "
        "quality score, lowest first"),
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> dict[str, Any]:
    """The workspace's calls, newest (or worst) first, one page at a time."""
    workspace_id = caller.workspace_id
    worst = sort == "worst"
    position = None
    if cursor is not None:
        try:
            position = repo.decode_cursor(workspace_id, cursor)
        except repo.InvalidCursor as error:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, str(error)) from None
        if (position.quality is not None) != worst:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, "cursor is for the other order")
    filters = history_filters(started_after, started_before, state, status_,
                              completion_reason, escalated, tool_error, quality_below)
    calls = await runtime.db.bounded(
        repo.list_calls(runtime.db.pool, workspace_id, limit=limit + 1, filters=filters,
                        cursor=position, worst_first=worst),
        what="call list")
    page, more = calls[:limit], len(calls) > limit
    next_cursor = None
    if more:
        last = page[-1]
        next_cursor = repo.encode_cursor(workspace_id, repo.CallCursor(
            datetime.fromisoformat(last["started_at"]), repo.as_uuid(last["id"]),
            last["quality_score"] if worst else None))
    # Rows as they are: `response_model` validates and serialises them once.
    return {"calls": page, "next_cursor": next_cursor}


@router.get("/quality-trend", response_model=list[QualityWeekOut], responses=AUTH_RESPONSES)
async def quality_trend(
    weeks: int = Query(default=12, ge=1, le=104, description="How many weeks back"),
    low_below: float = Query(default=3.0, ge=1, le=5,
                             description="A call scoring under this counts as low"),
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> list[Any]:
    """The workspace's average quality per week, oldest first (weeks with analysed calls)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since = today - timedelta(days=today.weekday(), weeks=weeks - 1)
    return await runtime.db.bounded(
        call_analyses.quality_by_week(runtime.db.pool, caller.workspace_id, since,
                                      low_below=low_below),
        what="quality trend")


@router.get("/{call_id}", response_model=CallDetail, responses={
    **AUTH_RESPONSES, 404: {"description": "No such call in this workspace"}})
async def call_detail(
    call_id: str,
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> dict[str, Any]:
    """One call with its turns, transitions, tool calls, events, escalations and safety."""
    detail = await runtime.db.bounded(
        repo.get_call_detail(runtime.db.pool, call_id, caller.workspace_id),
        what="call read")
    if detail is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "call not found")
    detail["safety"] = safety_state(detail["escalations"], detail["events"]).model_dump()
    detail["analysis"] = await runtime.db.bounded(
        call_analyses.get_analysis(runtime.db.pool, call_id), what="call analysis read")
    return detail  # validated and serialised once, by response_model
