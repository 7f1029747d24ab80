"""Every database write from a live call goes through this queue, off the audio path.

`submit` never blocks and never raises, so observers and processors can call it from
the voice path. A background task writes in batches; every write is idempotent
(unique keys + ON CONFLICT DO NOTHING, or an UPDATE), so retrying after a timeout
cannot duplicate anything. A batch that keeps failing is retried record by record,
and what still fails is appended to a spool file on disk, re-applied at the next
start. A DB hiccup costs latency in the background, never audio, never records.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
from loguru import logger

from config import Settings
from db.repositories import as_uuid, call_update_sql

BATCH_SIZE = 200
QUEUE_LIMIT = 10_000
MAX_BACKOFF_S = 5.0
# Errors that no retry can fix (a missing call row, a bad value): spill at once.
PERMANENT_ERRORS = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError, ValueError)


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
class CallUpdate:
    call_id: str
    fields: dict[str, Any]


Record = TurnRecord | TransitionRecord | ToolCallRecord | EventRecord | CallUpdate
RECORD_TYPES: dict[str, type] = {
    cls.__name__: cls for cls in (TurnRecord, TransitionRecord, ToolCallRecord, EventRecord, CallUpdate)
}
# Insert targets and their conflict keys.
_TABLES = {
    TurnRecord: ("turns", "(call_id, seq)"),
    TransitionRecord: ("state_transitions", "(call_id, seq)"),
    ToolCallRecord: ("tool_calls", "(call_id, tool_call_id)"),
    EventRecord: ("call_events", "(call_id, seq)"),
}


def _insert_sql(cls: type) -> tuple[str, list[str]]:
    table, key = _TABLES[cls]
    columns = [f.name for f in fields(cls)]
    placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders}) "
        f"ON CONFLICT {key} DO NOTHING"
    )
    return sql, columns


async def write_record(conn: asyncpg.Connection, record: Record) -> None:
    """Apply one record; safe to repeat."""
    if isinstance(record, CallUpdate):
        sql, values = call_update_sql(record.fields)
        await conn.execute(sql, as_uuid(record.call_id), *values)
        return
    sql, columns = _insert_sql(type(record))
    values = [getattr(record, column) for column in columns]
    values[0] = as_uuid(values[0])
    if as_uuid(record.call_id) is None:
        raise ValueError("record for a call id that is not a UUID")
    await conn.execute(sql, *values)


# --- Spool files (JSON lines) ------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__datetime__"}:
            return datetime.fromisoformat(value["__datetime__"])
        return {k: _decode(v) for k, v in value.items()}
    return value


def record_to_line(record: Record) -> str:
    body = {k: _encode(v) for k, v in asdict(record).items()}
    return json.dumps({"type": type(record).__name__, "record": body}, default=str)


def record_from_line(line: str) -> Record:
    item = json.loads(line)
    cls = RECORD_TYPES[item["type"]]
    return cls(**{k: _decode(v) for k, v in item["record"].items()})


class CallRecordWriter:
    """Bounded queue + background writer with retry, spill and replay."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings) -> None:
        self._pool = pool
        self._retries = settings.db_write_retries
        self._timeout = settings.db_write_timeout_s
        self._spool_dir = settings.data_dir / "spool"
        self._queue: asyncio.Queue[Record] = asyncio.Queue(maxsize=QUEUE_LIMIT)
        self._unfinished = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task | None = None
        self.written = 0
        self.retried = 0
        self.spilled = 0

    # --- Public ------------------------------------------------------------------

    def submit(self, record: Record) -> None:
        """Queue a record. Never blocks, never raises; overflow goes to disk."""
        try:
            self._queue.put_nowait(record)
            self._unfinished += 1
            self._idle.clear()
        except asyncio.QueueFull:
            logger.warning("call record queue full; spilling to disk")
            self._spill([record])
        except Exception as error:  # never let bookkeeping break a call
            logger.error(f"call record not queued ({type(error).__name__}); spilling")
            self._spill([record])

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="record-writer")

    async def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is written or spilled."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def close(self, timeout: float) -> None:
        """Flush what we can in `timeout`, spill the rest, stop the task."""
        flushed = await self.flush(timeout)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if not flushed:
            leftover = []
            while not self._queue.empty():
                leftover.append(self._queue.get_nowait())
            self._spill(leftover)
            logger.warning(f"writer closed with {len(leftover)} records spilled to disk")

    async def replay_spool(self) -> int:
        """Re-apply spilled records from earlier runs; returns how many were written."""
        if not self._spool_dir.exists():
            return 0
        replayed = 0
        for path in sorted(self._spool_dir.glob("spool-*.jsonl")):
            records = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    records.append(record_from_line(line))
                except (ValueError, KeyError, TypeError):
                    logger.error(f"unreadable spooled record in {path.name}; kept aside")
                    self._append(self._spool_dir / "rejected.jsonl", [line])
            rejected = []
            for record in records:
                try:
                    async with self._pool.acquire() as conn:
                        await asyncio.wait_for(write_record(conn, record), self._timeout)
                    replayed += 1
                except PERMANENT_ERRORS:
                    rejected.append(record_to_line(record))
                except Exception:
                    logger.warning(f"spool replay stopped at {path.name}: database unavailable")
                    return replayed
            if rejected:
                logger.error(f"{len(rejected)} spooled records rejected by the database; kept aside")
                self._append(self._spool_dir / "rejected.jsonl", rejected)
            path.unlink()
        if replayed:
            logger.info(f"replayed {replayed} spooled call records")
        return replayed

    # --- Background ----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < BATCH_SIZE and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._write_batch(batch)
            finally:
                self._unfinished -= len(batch)
                if self._unfinished == 0:
                    self._idle.set()

    async def _write_batch(self, batch: list[Record]) -> None:
        try:
            if not await self._write_batch_with_retries(batch):
                await self._write_individually(batch)
        except asyncio.CancelledError:
            self._spill(batch)  # shutting down mid-batch: keep it on disk
            raise

    async def _write_batch_with_retries(self, batch: list[Record]) -> bool:
        """True when the batch is written; False to fall back to one-by-one."""
        for attempt in range(self._retries + 1):
            try:
                async with self._pool.acquire(timeout=self._timeout) as conn:
                    async with conn.transaction():
                        for record in batch:
                            await asyncio.wait_for(write_record(conn, record), self._timeout)
                self.written += len(batch)
                return True
            except PERMANENT_ERRORS:
                return False  # one bad record spoils the batch: isolate it
            except Exception as error:
                self.retried += 1
                delay = min(MAX_BACKOFF_S, 0.1 * 2**attempt)
                logger.warning(
                    f"call record batch failed ({type(error).__name__}), retry in {delay:.1f}s"
                )
                await asyncio.sleep(delay)
        return False

    async def _write_individually(self, batch: list[Record]) -> None:
        failed: list[Record] = []
        for record in batch:
            try:
                async with self._pool.acquire(timeout=self._timeout) as conn:
                    await asyncio.wait_for(write_record(conn, record), self._timeout)
                self.written += 1
            except Exception as error:
                logger.error(
                    f"{type(record).__name__} for call {record.call_id} not written "
                    f"({type(error).__name__}); spilled"
                )
                failed.append(record)
        self._spill(failed)

    def _spill(self, records: list[Record]) -> None:
        if not records:
            return
        self.spilled += len(records)
        stamp = time.strftime("%Y%m%d")
        self._append(self._spool_dir / f"spool-{stamp}.jsonl", [record_to_line(r) for r in records])

    @staticmethod
    def _append(path: Path, lines: list[str]) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write("".join(line + "\n" for line in lines))
        except OSError as error:
            logger.critical(f"call records lost: cannot write spool file ({error})")
