"""The durable job queue: jobs run once, back off when they fail, are held when their
retries are spent, and outlive a worker that dies holding them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment

from db import jobs
from db.pool import Database
from runner.job_worker import APPLICATION, JobKind, JobWorker
from tests.jobs import eventually, test_worker

MIGRATION = Path(__file__).resolve().parents[2] / "db/migrations/0011_follow_through.sql"


def test_the_migration_creates_the_queue_exactly_as_the_pinned_library_installs_it():
    installed = QueryBuilderEnvironment().build_install_query().strip()
    assert installed in MIGRATION.read_text(encoding="utf-8")


@pytest.fixture
async def clean_queue(db: Database):
    await db.pool.execute("DELETE FROM pgqueuer")
    yield
    await db.pool.execute("DELETE FROM pgqueuer")


def _worker(db: Database, *kinds: JobKind, heartbeat_s: float = 20.0) -> JobWorker:
    return test_worker(db, {k.entrypoint: k for k in kinds}, heartbeat_s=heartbeat_s)


async def test_a_queued_job_runs_once_with_its_payload(db: Database, clean_queue):
    seen: list[dict] = []

    async def handle(payload: dict) -> None:
        seen.append(payload)

    worker = _worker(db, JobKind("greet", handle))
    worker.start()
    try:
        await jobs.enqueue(db.pool, "greet", {"who": "task-1", "n": 2})
        await eventually(lambda: _true(len(seen) == 1))
        await asyncio.sleep(0.3)
    finally:
        await worker.close()
    assert seen == [{"who": "task-1", "n": 2}]
    assert await jobs.list_jobs(db.pool, entrypoint="greet") == []  # done jobs leave


async def _true(value: bool) -> bool:
    return value


async def test_a_second_job_under_the_same_key_is_skipped_while_the_first_waits(
        db: Database, clean_queue):
    first = await jobs.enqueue(db.pool, "dial", {"task": "a"}, dedupe_key="task:a",
                               delay=timedelta(hours=1))
    second = await jobs.enqueue(db.pool, "dial", {"task": "a"}, dedupe_key="task:a")
    assert first is not None and second is None
    (row,) = await jobs.list_jobs(db.pool, dedupe_prefix="task:")
    assert (row.id, row.status, row.payload) == (first, "queued", {"task": "a"})


async def test_a_job_queued_in_a_transaction_that_rolls_back_never_exists(
        db: Database, clean_queue):
    with pytest.raises(RuntimeError):
        async with db.pool.acquire() as conn, conn.transaction():
            await jobs.enqueue(conn, "dial", {"task": "b"}, dedupe_key="task:b")
            raise RuntimeError("the promise was not made")
    assert await jobs.job_for(db.pool, "task:b") is None


async def test_a_failing_job_is_retried_then_held_as_failed_and_can_be_retried(
        db: Database, clean_queue):
    tries: list[int] = []

    async def flaky(payload: dict) -> None:
        tries.append(1)
        raise ConnectionError("practice system down")

    worker = _worker(db, JobKind("push", flaky, max_attempts=2,
                                 initial_delay=timedelta(milliseconds=50)))
    worker.start()
    try:
        job_id = await jobs.enqueue(db.pool, "push", {"booking": "x"}, dedupe_key="push:x")

        async def held() -> bool:
            row = await jobs.job_for(db.pool, "push:x")
            return row is not None and row.status == "failed"

        await eventually(held)
        assert len(tries) == 3  # the first run and two retries
        assert await jobs.retry_failed(db.pool, [job_id]) == 1
        await eventually(lambda: _true(len(tries) >= 4))
    finally:
        await worker.close()


async def test_a_cancelled_job_never_runs(db: Database, clean_queue):
    ran: list[dict] = []

    async def handle(payload: dict) -> None:
        ran.append(payload)

    await jobs.enqueue(db.pool, "dial", {"task": "c"}, dedupe_key="task:c",
                       delay=timedelta(seconds=1))
    assert await jobs.cancel_key(db.pool, "task:c") == 1
    worker = _worker(db, JobKind("dial", handle))
    worker.start()
    try:
        await asyncio.sleep(1.5)
    finally:
        await worker.close()
    assert ran == [] and await jobs.job_for(db.pool, "task:c") is None


async def test_a_job_held_by_a_worker_that_died_is_run_by_another(db: Database, clean_queue):
    """A worker's process died holding a job: the row says `picked` by it and its
    heartbeat stopped. Once the heartbeat is stale another worker runs the job."""
    finished: list[dict] = []

    async def completes(payload: dict) -> None:
        finished.append(payload)

    job_id = await jobs.enqueue(db.pool, "work", {"n": 1})
    await db.pool.execute(
        "UPDATE pgqueuer SET status = 'picked', queue_manager_id = gen_random_uuid(), "
        "heartbeat = now() - interval '5 seconds' WHERE id = $1", job_id)
    survivor = _worker(db, JobKind("work", completes), heartbeat_s=2.0)
    survivor.start()
    try:
        await eventually(lambda: _true(finished == [{"n": 1}]), timeout=15)
    finally:
        await survivor.close()


async def test_the_worker_reconnects_after_its_connection_is_dropped(db: Database, clean_queue):
    seen: list[dict] = []

    async def handle(payload: dict) -> None:
        seen.append(payload)

    worker = _worker(db, JobKind("note", handle))
    worker.start()
    try:
        await asyncio.wait_for(worker.running.wait(), 10)
        await _kill_workers(db.pool)
        await jobs.enqueue(db.pool, "note", {"after": "drop"})
        await eventually(lambda: _true(seen == [{"after": "drop"}]), timeout=15)
    finally:
        await worker.close()


async def _kill_workers(pool: asyncpg.Pool) -> None:
    await pool.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE application_name = $1", APPLICATION)
