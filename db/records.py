"""What a live call writes: record types, how each is applied, how each is spooled.

Each record carries its call id and its unique key (seq or tool_call_id), so
applying it twice changes nothing (INSERT … ON CONFLICT DO NOTHING, or an UPDATE of
fixed values stamped with when it was made, which a newer update always beats):
the writer may retry, and replay a spool after an outage, in any order. A call turned
away at the answer webhook has no row yet: `TurnedAwayCall` carries the row itself.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import asyncpg

from db.repositories import as_uuid, call_update_sql

# --- Records -------------------------------------------------------------------


@dataclass(frozen=True)
class TurnRecord:
    call_id: str
    seq: int
    speaker_id: str
    speaker_role: str
    text: str
    interrupted: bool = False
    user_speech_start_ms: int | None = None
    user_speech_end_ms: int | None = None
    engine_ms: int | None = None
    nav_ms: int | None = None
    render_ms: int | None = None
    audio_ttfb_ms: int | None = None
    agent_speech_start_ms: int | None = None
    agent_speech_end_ms: int | None = None
    emotion: str | None = None  # caller turns: the dominant emotion heard
    valence: float | None = None
    arousal: float | None = None
    tone: str | None = None  # agent turns: the voice tone used
    # [{"word", "start_ms", "end_ms"}] on the turn clock; None when the provider gave none
    words: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class TransitionRecord:
    call_id: str
    seq: int
    next_state: str
    previous_state: str | None = None
    reason: str | None = None
    at_ms: int | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    call_id: str
    tool_call_id: str
    name: str
    input: Any = None
    output: Any = None
    started_ms: int | None = None
    duration_ms: int | None = None
    succeeded: bool | None = None
    error_class: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class EventRecord:
    call_id: str
    seq: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    at_ms: int | None = None


@dataclass(frozen=True)
class EscalationRecord:
    """A safety escalation, on the call and in the operator queue."""

    call_id: str
    seq: int
    concept: str
    severity: str
    similarity: float | None = None
    judge: str | None = None
    reason: str | None = None
    at_ms: int | None = None


@dataclass(frozen=True)
class CallUpdate:
    """New values for allow-listed `calls` columns, stamped when made (orders replays)."""

    call_id: str
    fields: dict[str, Any]
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class TurnedAwayCall:
    """A call the answer webhook turned away (the lines busy, the database not answering):
    its row, already closed with `completion_reason`, and the event saying why, applied
    together so a replay writes all of it or none.

    `call_id` is chosen before any row exists. A row already under it (an insert that
    timed out yet committed) is closed instead; a row already under its `call_sid` (the
    same call answered before) is left as it is. A workspace or service that no longer
    exists is left empty rather than losing the row.
    """

    call_id: str
    call_sid: str | None
    completion_reason: str
    event: str
    event_data: dict[str, Any] = field(default_factory=dict)
    workspace_id: str | None = None
    service_id: str | None = None
    from_number: str | None = None
    to_number: str | None = None
    direction: str = "inbound"
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


Record = (TurnRecord | TransitionRecord | ToolCallRecord | EventRecord | EscalationRecord
          | CallUpdate | TurnedAwayCall)
RECORD_TYPES: dict[str, type[Record]] = {
    cls.__name__: cls
    for cls in (TurnRecord, TransitionRecord, ToolCallRecord, EventRecord, EscalationRecord,
                CallUpdate, TurnedAwayCall)
}
# Insert target and conflict key per record type (CallUpdate is an UPDATE).
_TABLES: dict[type[Record], tuple[str, str]] = {
    TurnRecord: ("turns", "(call_id, seq)"),
    TransitionRecord: ("state_transitions", "(call_id, seq)"),
    ToolCallRecord: ("tool_calls", "(call_id, tool_call_id)"),
    EventRecord: ("call_events", "(call_id, seq)"),
    EscalationRecord: ("escalations", "(call_id, seq)"),
}


def is_record(value: object) -> bool:
    return type(value) in _TABLES or type(value) in (CallUpdate, TurnedAwayCall)


# --- Applying records ----------------------------------------------------------


def _insert_statement(cls: type[Record]) -> tuple[str, tuple[str, ...]]:
    table, key = _TABLES[cls]
    columns = tuple(f.name for f in fields(cls))
    placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders}) "
        f"ON CONFLICT {key} DO NOTHING"
    )
    return sql, columns


_INSERTS = {cls: _insert_statement(cls) for cls in _TABLES}


def _call_uuid(record: Record) -> uuid.UUID:
    call_id = as_uuid(record.call_id)
    if call_id is None:
        raise ValueError("call record for a call id that is not a UUID")
    return call_id


def _insert_args(record: Record) -> tuple[Any, ...]:
    _, columns = _INSERTS[type(record)]
    return (_call_uuid(record), *(getattr(record, column) for column in columns[1:]))


_TURNED_AWAY_ROW = """
    INSERT INTO calls (id, workspace_id, service_id, call_sid, direction, from_number,
                       to_number, status, started_at, ended_at, completion_reason, updated_at)
    VALUES ($1, (SELECT id FROM workspaces WHERE id = $2),
            (SELECT id FROM services WHERE id = $3), $4, $5, $6, $7, 'completed', $8, $8,
            $9, $8)
    ON CONFLICT DO NOTHING"""
_TURNED_AWAY_CLOSE = """
    UPDATE calls SET status = 'completed', ended_at = $2, completion_reason = $3,
                     updated_at = GREATEST(updated_at, $2)
    WHERE id = $1 AND ended_at IS NULL"""
_TURNED_AWAY_EVENT = """
    INSERT INTO call_events (call_id, seq, type, data, at_ms)
    SELECT $1, 1, $2, $3, 0 WHERE EXISTS (SELECT 1 FROM calls WHERE id = $1)
    ON CONFLICT (call_id, seq) DO NOTHING"""


async def _write_turned_away(conn: asyncpg.Connection, call: TurnedAwayCall) -> None:
    call_id = _call_uuid(call)
    await conn.execute(
        _TURNED_AWAY_ROW, call_id, as_uuid(call.workspace_id), as_uuid(call.service_id),
        call.call_sid, call.direction, call.from_number, call.to_number, call.at,
        call.completion_reason,
    )
    await conn.execute(_TURNED_AWAY_CLOSE, call_id, call.at, call.completion_reason)
    await conn.execute(_TURNED_AWAY_EVENT, call_id, call.event, call.event_data)


async def write_records(conn: asyncpg.Connection, records: Sequence[Record]) -> None:
    """Apply records in order (runs of one insert type as one executemany). Safe to repeat."""
    for cls, run in itertools.groupby(records, key=type):
        group = list(run)
        if cls in _INSERTS:
            sql, _ = _INSERTS[cls]
            await conn.executemany(sql, [_insert_args(record) for record in group])
            continue
        if cls is TurnedAwayCall:
            for call in group:
                await _write_turned_away(conn, call)  # type: ignore[arg-type]
            continue
        for update in group:
            if not isinstance(update, CallUpdate):
                raise TypeError(f"not a call record: {cls.__name__}")
            sql, values = call_update_sql(update.fields)
            await conn.execute(sql, _call_uuid(update), update.at, *values)


def describe(records: Sequence[Record]) -> str:
    """Record types and call ids only: content (transcripts, numbers) never reaches logs."""
    kinds = sorted({type(record).__name__ for record in records})
    calls = sorted({str(getattr(record, "call_id", "?")) for record in records})
    shown = ", ".join(calls[:3]) + (f" (+{len(calls) - 3} more)" if len(calls) > 3 else "")
    return f"{len(records)} {'/'.join(kinds)} for call {shown}"


# --- Spool lines ---------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__datetime__"}:
            return datetime.fromisoformat(value["__datetime__"])
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


def record_to_line(record: Record) -> str:
    body = {key: _encode(value) for key, value in asdict(record).items()}
    return json.dumps({"type": type(record).__name__, "record": body}, default=str)


def record_from_line(line: str) -> Record:
    """Raises ValueError/KeyError/TypeError for a line that is not a record."""
    item = json.loads(line)
    cls = RECORD_TYPES[item["type"]]
    return cls(**{key: _decode(value) for key, value in item["record"].items()})
