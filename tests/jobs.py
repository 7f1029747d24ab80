"""Running durable jobs in a test: a worker on the session's database that looks for new
jobs often, and a bounded wait for what its jobs do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta

from db import jobs
from db.pool import Database
from runner.job_worker import JobKind, JobWorker


def test_worker(db: Database, kinds: Mapping[str, JobKind], *,
                heartbeat_s: float = 20.0, dequeue_s: float = 0.5) -> JobWorker:
    """A worker for `kinds` that picks a job up within half a second of it being due."""
    return JobWorker(db.dsn, kinds, heartbeat_timeout=timedelta(seconds=heartbeat_s),
                     dequeue_timeout=timedelta(seconds=dequeue_s))


test_worker.__test__ = False  # a helper, not a test


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    """Wait until `check()` is true; fail after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def held_failed(db: Database, dedupe_key: str) -> bool:
    """The job under `dedupe_key` spent its retries and is held as failed."""
    job = await jobs.job_for(db.pool, dedupe_key)
    return job is not None and job.status == "failed"


async def work_until(worker: JobWorker, check: Callable[[], Awaitable[bool]],
                     timeout: float = 20.0) -> None:
    """Run `worker` until `check` holds, then stop it."""
    worker.start()
    try:
        await eventually(check, timeout)
    finally:
        await worker.close()
