"""A finished call's record as its analysis reads it, and the analysis it gets.

The analysis reads the call whole (its turns, tool calls, events, escalations, the
world-model events it wrote) in one read-only snapshot, and writes one row per call
(`call_analyses`): running it again replaces that row, so a retried job never leaves two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from db.repositories import as_uuid

# The five dimensions a call's quality is scored on, in the order they are shown.
DIMENSIONS = ("task_completion", "information_accuracy", "conversation_flow",
              "error_recovery", "caller_experience")


@dataclass(frozen=True)
class RecordedTurn:
    seq: int
    role: str  # caller, agent, operator
    text: str
    interrupted: bool = False
    speech_start_ms: int | None = None  # the caller's speech, or the agent's
    speech_end_ms: int | None = None
    emotion: str | None = None
    valence: float | None = None  # signed: below 0 unpleasant
    words: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RecordedTool:
    name: str
    succeeded: bool | None
    error_class: str | None
    started_ms: int | None
    input: Any = None
    output: Any = None


@dataclass(frozen=True)
class RecordedEvent:
    seq: int
    type: str
    data: dict[str, Any]
    at_ms: int | None


@dataclass(frozen=True)
class RecordedHop:
    """A context-graph transition: the exit taken, and when."""

    exit: str | None
    next_state: str
    at_ms: int | None


@dataclass(frozen=True)
class RecordedWrite:
    """A world-model event the call wrote (a booking, a change, a message)."""

    type: str
    summary: str
    turn_seq: int | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class CallRecord:
    """Everything an analysis of one finished call reads."""

    call_id: str
    workspace_id: str
    service_id: str | None
    patient_id: str | None
    direction: str
    started_at: datetime
    duration_s: float | None
    completion_reason: str | None
    final_state: str | None
    transcript_accuracy: float | None
    verified_words: list[dict[str, Any]]
    turns: list[RecordedTurn]
    tools: list[RecordedTool]
    events: list[RecordedEvent]
    escalations: list[dict[str, Any]]
    writes: list[RecordedWrite]
    hops: list[RecordedHop] = field(default_factory=list)

    def events_of(self, *types: str) -> list[RecordedEvent]:
        return [e for e in self.events if e.type in types]

    def turn(self, seq: int) -> RecordedTurn | None:
        return next((t for t in self.turns if t.seq == seq), None)

    def caller_turns(self) -> list[RecordedTurn]:
        """The caller's turns that said something, in order."""
        return [t for t in self.turns if t.role == "caller" and t.text.strip()]


def _json(value: Any, default: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return default
    return default if value is None else value


async def load_call_record(pool: asyncpg.Pool, call_id: str) -> CallRecord | None:
    """The call's record as it stands (None: no such call, or one of no workspace)."""
    key = as_uuid(call_id)
    if key is None:
        return None
    async with pool.acquire() as conn, conn.transaction(readonly=True,
                                                        isolation="repeatable_read"):
        call = await conn.fetchrow("SELECT * FROM calls WHERE id = $1", key)
        if call is None or call["workspace_id"] is None:
            return None
        turns = await conn.fetch("SELECT * FROM turns WHERE call_id = $1 ORDER BY seq", key)
        tools = await conn.fetch(
            "SELECT * FROM tool_calls WHERE call_id = $1 ORDER BY started_ms NULLS LAST, id", key)
        events = await conn.fetch(
            "SELECT seq, type, data, at_ms FROM call_events WHERE call_id = $1 ORDER BY seq", key)
        escalations = await conn.fetch(
            "SELECT seq, concept, severity, status, at_ms FROM escalations WHERE call_id = $1 "
            "ORDER BY seq", key)
        hops = await conn.fetch(
            "SELECT reason, next_state, at_ms FROM state_transitions WHERE call_id = $1 "
            "ORDER BY seq", key)
        writes = await conn.fetch(
            "SELECT type, summary, turn_seq, payload FROM clinical_events WHERE call_id = $1 "
            "AND source NOT IN ('practice', 'verification') ORDER BY occurred_at, id", key)
    return CallRecord(
        call_id=str(call["id"]), workspace_id=str(call["workspace_id"]),
        service_id=str(call["service_id"]) if call["service_id"] else None,
        patient_id=str(call["patient_id"]) if call["patient_id"] else None,
        direction=call["direction"], started_at=call["started_at"],
        duration_s=call["duration_s"], completion_reason=call["completion_reason"],
        final_state=call["final_state"], transcript_accuracy=call["transcript_accuracy"],
        verified_words=_json(call["verified_words"], []),
        turns=[_turn(row) for row in turns],
        tools=[RecordedTool(row["name"], row["succeeded"], row["error_class"],
                            row["started_ms"], _json(row["input"], None),
                            _json(row["output"], None)) for row in tools],
        events=[RecordedEvent(row["seq"], row["type"], _json(row["data"], {}), row["at_ms"])
                for row in events],
        escalations=[dict(row) for row in escalations],
        writes=[RecordedWrite(row["type"], row["summary"], row["turn_seq"],
                              _json(row["payload"], {})) for row in writes],
        hops=[RecordedHop(row["reason"], row["next_state"], row["at_ms"]) for row in hops],
    )


def _turn(row: asyncpg.Record) -> RecordedTurn:
    caller = row["speaker_role"] == "caller"
    start = row["user_speech_start_ms"] if caller else row["agent_speech_start_ms"]
    end = row["user_speech_end_ms"] if caller else row["agent_speech_end_ms"]
    return RecordedTurn(row["seq"], row["speaker_role"], row["text"], row["interrupted"],
                        start, end, row["emotion"], row["valence"],
                        _json(row["words"], []) or [])


async def store_analysis(
    pool: asyncpg.Pool, record: CallRecord, *, analyst: str, fallback: str | None,
    summary: dict[str, Any], quality: dict[str, Any], quality_score: float, duration_ms: int,
) -> None:
    """Write the call's analysis, replacing an earlier one."""
    await pool.execute(
        """INSERT INTO call_analyses (call_id, workspace_id, patient_id, analyst, fallback,
                                      summary, quality, quality_score, duration_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (call_id) DO UPDATE SET
               patient_id = EXCLUDED.patient_id, analyst = EXCLUDED.analyst,
               fallback = EXCLUDED.fallback, summary = EXCLUDED.summary,
               quality = EXCLUDED.quality, quality_score = EXCLUDED.quality_score,
               duration_ms = EXCLUDED.duration_ms, analysed_at = now()""",
        as_uuid(record.call_id), as_uuid(record.workspace_id), as_uuid(record.patient_id),
        analyst, fallback, summary, quality, quality_score,
        duration_ms)


async def get_analysis(pool: asyncpg.Pool, call_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT analyst, fallback, summary, quality, quality_score, duration_ms, analysed_at "
        "FROM call_analyses WHERE call_id = $1", as_uuid(call_id))
    if row is None:
        return None
    return {**dict(row), "summary": _json(row["summary"], {}),
            "quality": _json(row["quality"], {})}


@dataclass(frozen=True)
class EarlierCall:
    """One of a patient's earlier calls, with its analysis's summary."""

    call_id: str
    started_at: datetime
    summary: dict[str, Any]


async def earlier_calls(pool: asyncpg.Pool, patient_id: str, since: datetime, *,
                        before_call: str | None = None, limit: int = 5) -> list[EarlierCall]:
    """The patient's analysed calls started at or after `since` (newest first), this
    call (`before_call`) left out."""
    rows = await pool.fetch(
        """SELECT c.id, c.started_at, a.summary FROM calls c
           JOIN call_analyses a ON a.call_id = c.id
           WHERE c.patient_id = $1 AND c.started_at >= $2 AND c.id IS DISTINCT FROM $3
           ORDER BY c.started_at DESC LIMIT $4""",
        as_uuid(patient_id), since, as_uuid(before_call) if before_call else None, limit)
    return [EarlierCall(str(r["id"]), r["started_at"], _json(r["summary"], {})) for r in rows]



@dataclass(frozen=True)
class QualityWeek:
    """One week of a workspace's analysed calls."""

    week_start: datetime
    calls: int
    average: float
    low: int  # calls scoring under `low_below`
    dimensions: dict[str, float]


async def quality_by_week(pool: asyncpg.Pool, workspace_id: str, since: datetime, *,
                          low_below: float) -> list[QualityWeek]:
    """Average scores per week (weeks start on Monday, UTC) of calls started since `since`,
    oldest first."""
    per_dimension = ",\n".join(
        f"avg((a.quality->'{name}'->>'score')::real) AS {name}" for name in DIMENSIONS)
    rows = await pool.fetch(
        f"""SELECT date_trunc('week', c.started_at AT TIME ZONE 'UTC') AS week,
                   count(*) AS calls, avg(a.quality_score) AS average,
                   count(*) FILTER (WHERE a.quality_score < $3) AS low,
                   {per_dimension}
            FROM call_analyses a JOIN calls c ON c.id = a.call_id
            WHERE a.workspace_id = $1 AND c.started_at >= $2
            GROUP BY week ORDER BY week""",
        as_uuid(workspace_id), since, low_below)
    return [QualityWeek(row["week"].replace(tzinfo=UTC), row["calls"],
                        round(float(row["average"]), 2), row["low"],
                        {name: round(float(row[name]), 2) for name in DIMENSIONS
                         if row[name] is not None})
            for row in rows]
