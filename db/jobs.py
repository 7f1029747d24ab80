"""The durable job queue: PgQueuer's tables in the service's own PostgreSQL.

Work that must happen even if this process dies (dialling an outbound task, pushing a
booking to the practice system, post-call analysis) is a job: a row written before the
work starts, picked by exactly one worker of any process (`FOR UPDATE SKIP LOCKED`),
picked again when that worker's heartbeat goes stale, retried with backoff when it
raises, and kept with status `failed` once its retries are spent, for a person to retry.

Enqueue inside the transaction that makes the promise (pass its connection) and the
job exists exactly when the promise does. A `dedupe_key` keeps one queued or running
job per key: a second enqueue of the same key is skipped and answers None.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, Queries

JobStatus = str  # queued, picked, successful, exception, canceled, deleted, failed
OPEN_STATUSES = ("queued", "picked")


def _queries(db: asyncpg.Pool | asyncpg.Connection) -> Queries:
    driver = AsyncpgPoolDriver(db) if isinstance(db, asyncpg.Pool) else AsyncpgDriver(db)
    return Queries(driver)


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(payload), separators=(",", ":"), default=str).encode("utf-8")


def decode(payload: bytes | None) -> dict[str, Any]:
    """A job's payload; {} for none or one that is not a JSON object."""
    try:
        value = json.loads(payload or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def enqueue(
    db: asyncpg.Pool | asyncpg.Connection, entrypoint: str, payload: Mapping[str, Any], *,
    priority: int = 0, delay: timedelta | None = None, dedupe_key: str | None = None,
) -> int | None:
    """Queue one job (run no sooner than `delay` from now); its id, or None when a job
    with the same `dedupe_key` is already queued or running."""
    ids = await _queries(db).enqueue(
        entrypoint, encode(payload), priority, max(delay, timedelta(0)) if delay else None,
        dedupe_key, on_conflict="skip")
    return int(ids[0]) if ids and ids[0] is not None else None


@dataclass(frozen=True)
class JobRow:
    id: int
    entrypoint: str
    status: JobStatus
    priority: int
    attempts: int
    execute_after: datetime
    created: datetime
    updated: datetime
    dedupe_key: str | None
    payload: dict[str, Any]


_COLUMNS = ("id, entrypoint, status::text AS status, priority, attempts, execute_after, "
            "created, updated, dedupe_key, payload")


def _row(record: asyncpg.Record) -> JobRow:
    return JobRow(**{**dict(record), "payload": decode(record["payload"])})


async def list_jobs(
    pool: asyncpg.Pool, *, entrypoint: str | None = None, status: str | None = None,
    dedupe_prefix: str | None = None, limit: int = 100,
) -> list[JobRow]:
    """Queued, running and failed jobs, newest first (finished ones leave the table)."""
    rows = await pool.fetch(
        f"""SELECT {_COLUMNS} FROM pgqueuer
            WHERE ($1::text IS NULL OR entrypoint = $1)
              AND ($2::text IS NULL OR status::text = $2)
              AND ($3::text IS NULL OR dedupe_key LIKE $3 || '%')
            ORDER BY id DESC LIMIT $4""",
        entrypoint, status, dedupe_prefix, limit)
    return [_row(r) for r in rows]


async def job_for(pool: asyncpg.Pool | asyncpg.Connection, dedupe_key: str) -> JobRow | None:
    """The queued, running or failed job under a key."""
    row = await pool.fetchrow(
        f"SELECT {_COLUMNS} FROM pgqueuer WHERE dedupe_key = $1 ORDER BY id DESC LIMIT 1",
        dedupe_key)
    return _row(row) if row else None


async def jobs_by_id(pool: asyncpg.Pool, job_ids: list[int]) -> list[JobRow]:
    """The jobs with these ids still in the table (finished ones have left it)."""
    rows = await pool.fetch(
        f"SELECT {_COLUMNS} FROM pgqueuer WHERE id = ANY($1::bigint[]) ORDER BY id", job_ids)
    return [_row(r) for r in rows]


async def forgive_failures(db: asyncpg.Pool | asyncpg.Connection, dedupe_key: str) -> None:
    """The running job under a key has not failed (it waits for something, and will be
    run again): its count of failures starts again, so its retries are kept for real
    errors."""
    await db.execute(
        "UPDATE pgqueuer SET attempts = 0 WHERE dedupe_key = $1 AND status = 'picked'",
        dedupe_key)


async def run_in(db: asyncpg.Pool | asyncpg.Connection, entrypoint: str,
                 payload: Mapping[str, Any], *, dedupe_key: str, delay: timedelta,
                 priority: int = 0) -> None:
    """The job under a key runs `delay` from now: the queued one is moved, else one is
    queued (none when one is running: it will look at the state it works on again)."""
    delay = max(delay, timedelta(0))
    moved = await db.execute(
        """UPDATE pgqueuer SET execute_after = now() + $2::interval, priority = $3
            WHERE dedupe_key = $1 AND status = 'queued'""",
        dedupe_key, delay, priority)
    if moved == "UPDATE 0":
        await enqueue(db, entrypoint, payload, priority=priority, delay=delay or None,
                      dedupe_key=dedupe_key)


async def cancel(db: asyncpg.Pool | asyncpg.Connection, job_ids: list[int]) -> None:
    """Cancel queued jobs (a running one is told, and stops at its next check)."""
    if job_ids:
        await _queries(db).mark_job_as_cancelled(job_ids)  # type: ignore[arg-type]


async def cancel_key(db: asyncpg.Pool | asyncpg.Connection, dedupe_key: str, *,
                     only_queued: bool = False) -> int:
    """Cancel the open job under a key (`only_queued`: not one already running); how
    many were cancelled."""
    statuses = ["queued"] if only_queued else list(OPEN_STATUSES)
    ids = [r["id"] for r in await db.fetch(
        "SELECT id FROM pgqueuer WHERE dedupe_key = $1 AND status = ANY($2::pgqueuer_status[])",
        dedupe_key, statuses)]
    await cancel(db, ids)
    return len(ids)


async def retry_failed(pool: asyncpg.Pool, job_ids: list[int]) -> int:
    """Queue failed jobs again, now; how many were queued."""
    found = [r["id"] for r in await pool.fetch(
        "SELECT id FROM pgqueuer WHERE id = ANY($1::bigint[]) AND status = 'failed'", job_ids)]
    if found:
        await _queries(pool).requeue_jobs(found)  # type: ignore[arg-type]
    return len(found)
