"""Every database write from a live call goes through this queue, off the audio path.

`submit` never blocks and never raises, so observers and processors can call it from
the voice path. A background task writes in batches; every write is idempotent
(see `db.records`), so retrying after a timeout cannot duplicate anything. A batch
that keeps failing is appended to a spool file (`DATA_DIR/spool/`), which
`replay_spool` re-applies at the next start and whenever the database supervisor
(`db.supervisor`) sees the database healthy again; a record the database rejects outright
(a bad value, a missing call) goes to `rejected.jsonl` instead of being retried
forever. A DB hiccup costs latency in the background, never audio, never records.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import asyncpg
from loguru import logger

from config import Settings
from db.deadline import within
from db.records import (
    CallUpdate,
    EscalationRecord,
    EventRecord,
    Record,
    ToolCallRecord,
    TransitionRecord,
    TurnedAwayCall,
    TurnRecord,
    describe,
    is_record,
    record_from_line,
    record_to_line,
    write_records,
)
from db.spool import REJECTED_NAME, append_lines, claimed_files

__all__ = [
    "CallRecordWriter", "CallUpdate", "EscalationRecord", "EventRecord", "Record",
    "ToolCallRecord",
    "TransitionRecord", "TurnRecord", "TurnedAwayCall",
]

BATCH_SIZE = 200
QUEUE_LIMIT = 10_000
BACKOFF_BASE_S = 0.1
MAX_BACKOFF_S = 5.0
# Errors no retry can fix (a missing call row, a value of the wrong type).
REJECTED_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.IntegrityConstraintViolationError, asyncpg.DataError, ValueError, TypeError,
)


class CallRecordWriter:
    """Bounded queue + one background task: batched, retried, spilled, replayed.

    Use from the event loop's thread. Counters: `written`, `retried` (attempts
    repeated after a failure), `spilled` (to the spool, replayable), `rejected`
    (refused by the database, kept aside), `replayed` (from the spool).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        queue_limit: int = QUEUE_LIMIT,
        batch_size: int = BATCH_SIZE,
        backoff_s: float = BACKOFF_BASE_S,
    ) -> None:
        self._pool = pool
        self._retries = settings.storage.db_write_retries
        self._timeout = settings.storage.db_write_timeout_s
        self._cleanup_s = settings.storage.db_cleanup_timeout_s
        self._spool_dir = settings.storage.data_dir / "spool"
        self._queue_limit = queue_limit
        self._batch_size = batch_size
        self._backoff_s = backoff_s
        self._queue: deque[Record] = deque()
        self._wakeup = asyncio.Event()
        self._queued_total = 0  # records ever queued
        self._done_total = 0  # of those, written/spilled/rejected: always a FIFO prefix
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._overflow_logged = False
        self.written = 0
        self.retried = 0
        self.spilled = 0
        self.rejected = 0
        self.replayed = 0
        self.replay_complete = True  # the last replay found the database up to the end

    @property
    def pending(self) -> int:
        """Records queued or being written."""
        return self._queued_total - self._done_total

    # --- Public ------------------------------------------------------------------

    def submit(self, record: Record) -> None:
        """Queue a record. Never blocks, never raises; overflow or a closed writer spills."""
        try:
            if not is_record(record):
                logger.error(f"not a call record ({type(record).__name__}); ignored")
                return
            if self._closed or len(self._queue) >= self._queue_limit:
                self._spill_at_submit(record)
                return
            self._queue.append(record)
            self._queued_total += 1
            self._wakeup.set()
        except Exception as error:  # bookkeeping must never break a call
            logger.error(f"call record not queued ({type(error).__name__})")

    async def start(self) -> None:
        """Start the background task (idempotent)."""
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="call-record-writer"
            )

    async def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is written or spilled; False on timeout.

        Later submissions (other calls) do not extend the wait.
        """
        target = self._queued_total
        if self._done_total >= target:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (target, waiter)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(waiter, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    async def close(self, timeout: float) -> None:
        """Flush what we can within `timeout`, spill the rest, stop the task."""
        if self._closed:
            return
        if self._task is not None:
            await self.flush(timeout)
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()  # an in-flight batch spills itself
            await asyncio.gather(task, return_exceptions=True)
        leftover = list(self._queue)
        self._queue.clear()
        if leftover:
            logger.warning(f"writer closed with {len(leftover)} call records unwritten; spilled")
            self._spill(leftover)
            self._finish(len(leftover))

    async def replay_spool(self) -> int:
        """Re-apply spilled records (earlier runs', or this one's during an outage); returns
        how many were applied. `replay_complete` says whether it got through them all."""
        applied = 0
        complete = True
        try:
            with claimed_files(self._spool_dir) as paths:
                for path in paths:
                    count, complete = await self._replay_file(path)
                    applied += count
                    if not complete:
                        break
        except OSError as error:
            logger.error(f"spool replay skipped: spool unusable ({type(error).__name__})")
            complete = False
        self.replay_complete = complete
        if applied:
            logger.info(f"replayed {applied} spooled call records")
        self.replayed += applied
        return applied

    # --- Background ----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            batch = self._take_batch()
            if not batch:
                continue
            try:
                await self._write_batch(batch)
            except asyncio.CancelledError:
                self._spill(batch)  # shutting down mid-batch: keep it on disk
                raise
            except Exception as error:  # the writer must outlive any single failure
                logger.error(f"call record batch failed unexpectedly ({type(error).__name__})")
                self._spill(batch)
            finally:
                self._finish(len(batch))

    def _take_batch(self) -> list[Record]:
        batch: list[Record] = []
        while self._queue and len(batch) < self._batch_size:
            batch.append(self._queue.popleft())
        if not self._queue:
            self._wakeup.clear()
            self._overflow_logged = False
        return batch

    def _finish(self, count: int) -> None:
        self._done_total += count
        for target, waiter in self._waiters:
            if target <= self._done_total and not waiter.done():
                waiter.set_result(None)

    async def _attempt(self, records: Sequence[Record]) -> None:
        """One bounded attempt: all of `records` in one transaction, or none. The bound
        holds on a frozen server (`db.deadline.within`); a timed-out transaction is cut
        off, and since every write is idempotent, a retry or replay of one that did
        commit changes nothing."""
        await within(self._transaction(records), self._timeout, what="call record batch",
                     cleanup_s=self._cleanup_s)

    async def _transaction(self, records: Sequence[Record]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await write_records(conn, records)

    async def _write_batch(self, batch: list[Record]) -> None:
        for attempt in range(self._retries + 1):
            try:
                await self._attempt(batch)
            except REJECTED_ERRORS:
                applied, remaining = await self._apply_each(batch)  # isolate the bad record
                self.written += applied
                self._spill(remaining)
                return
            except Exception as error:
                if attempt == self._retries:
                    logger.error(
                        f"{describe(batch)} not written after {attempt + 1} attempts "
                        f"({type(error).__name__}); spilled to disk"
                    )
                    break
                self.retried += 1
                delay = min(MAX_BACKOFF_S, self._backoff_s * 2**attempt)
                logger.warning(
                    f"call record batch failed ({type(error).__name__}); "
                    f"retry {attempt + 1}/{self._retries} in {delay:.2f}s"
                )
                await asyncio.sleep(delay)
            else:
                self.written += len(batch)
                return
        self._spill(batch)

    async def _apply_each(self, records: list[Record]) -> tuple[int, list[Record]]:
        """Record by record, setting aside what the database rejects.

        Returns (applied, not attempted): when the database fails mid-way, the rest
        is handed back untouched rather than costing a timeout each.
        """
        applied = 0
        for index, record in enumerate(records):
            try:
                await self._attempt([record])
            except REJECTED_ERRORS as error:
                self._reject(record, error)
            except Exception as error:
                logger.warning(
                    f"database failed while isolating a rejected record ({type(error).__name__})"
                )
                return applied, records[index:]
            else:
                applied += 1
        return applied, []

    # --- Spool -----------------------------------------------------------------------

    def _spool_path(self) -> Path:
        return self._spool_dir / f"spool-{time.strftime('%Y%m%d')}-{os.getpid()}.jsonl"

    def _spill_at_submit(self, record: Record) -> None:
        if not self._overflow_logged:  # once per episode, not once per record
            self._overflow_logged = True
            reason = "is closed" if self._closed else f"queue is full ({self._queue_limit})"
            logger.warning(f"call record writer {reason}: spilling records to disk")
        self._spill([record])

    def _spill(self, records: Sequence[Record]) -> None:
        """Append records to the spool; never raises (a full disk is logged as loss)."""
        if not records:
            return
        try:
            append_lines(self._spool_path(), [record_to_line(record) for record in records])
            self.spilled += len(records)
        except Exception as error:
            logger.critical(f"{describe(records)} LOST: spool unwritable ({type(error).__name__})")

    def _reject(self, record: Record, error: Exception) -> None:
        self.rejected += 1
        logger.error(
            f"{type(record).__name__} for call {record.call_id} rejected by the database "
            f"({type(error).__name__}); kept in spool/{REJECTED_NAME}"
        )
        self._keep_aside([record_to_line(record)])

    def _keep_aside(self, lines: list[str]) -> None:
        try:
            append_lines(self._spool_dir / REJECTED_NAME, lines)
        except Exception as error:
            logger.critical(f"{len(lines)} rejected call records LOST ({type(error).__name__})")

    async def _replay_file(self, path: Path) -> tuple[int, bool]:
        """Apply one claimed spool file; (records applied, whether the file is done)."""
        records = self._read_spool(path)
        applied = 0
        for start in range(0, len(records), self._batch_size):
            chunk = records[start:start + self._batch_size]
            try:
                await self._attempt(chunk)
                applied += len(chunk)
                continue
            except REJECTED_ERRORS:
                done, remaining = await self._apply_each(chunk)
                applied += done
            except Exception as error:
                logger.warning(f"spool replay paused: database down ({type(error).__name__})")
                remaining = chunk
            if remaining:
                self._requeue(path, remaining + records[start + self._batch_size:])
                return applied, False
        path.unlink(missing_ok=True)
        return applied, True

    def _read_spool(self, path: Path) -> list[Record]:
        records: list[Record] = []
        unreadable: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                records.append(record_from_line(line))
            except (ValueError, KeyError, TypeError):  # e.g. a line cut short by a crash
                unreadable.append(line)
        if unreadable:
            logger.error(f"{len(unreadable)} unreadable spool lines kept in spool/{REJECTED_NAME}")
            self._keep_aside(unreadable)
        return records

    def _requeue(self, claimed: Path, remaining: list[Record]) -> None:
        """Keep only what was not applied, so nothing is re-applied (or lost) next time."""
        try:
            append_lines(self._spool_path(), [record_to_line(record) for record in remaining])
        except OSError as error:
            logger.error(f"spool file kept whole ({type(error).__name__}); replays are idempotent")
            return
        claimed.unlink(missing_ok=True)
