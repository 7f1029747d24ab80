"""The follow-through's jobs on the durable queue: a cancellation's waitlist offers are
made by whichever worker picks the job, and the reminder sweep is one periodic job
across every process that keeps running, even after a failed run."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from types import SimpleNamespace

from db import jobs, outbound, scheduling, waitlist
from db.pool import Database
from runner.job_kinds import job_kinds
from runner.job_worker import JobKind, JobWorker, periodic_key
from tests.db.small_clinic import CHICAGO, small_clinic
from tests.jobs import eventually, test_worker

NOW = datetime(2027, 1, 4, 10, 0, tzinfo=CHICAGO)


def _worker(db: Database, kinds: dict[str, JobKind]) -> JobWorker:
    return test_worker(db, kinds, dequeue_s=0.3)


async def test_the_service_runs_waitlist_offers_and_a_periodic_reminder_sweep(settings):
    kinds = job_kinds(SimpleNamespace(settings=settings))
    assert kinds[waitlist.OFFER_JOB].every is None
    assert kinds["reminder_sweep"].every == timedelta(minutes=5)


async def test_a_cancellation_s_offer_is_made_by_the_job_worker(
        db, settings, workspace_id):
    clinic = await small_clinic(db, workspace_id)
    ada, ben = await clinic.patient("Ada"), await clinic.patient("Ben")
    await clinic.waits(ada, clinic.physio, NOW - timedelta(days=7))
    booking = await clinic.book(ben, NOW + timedelta(days=2))
    runtime = SimpleNamespace(db=db, settings=settings, clock=lambda: NOW)
    offer = job_kinds(runtime)[waitlist.OFFER_JOB]
    worker = _worker(db, {offer.entrypoint: offer})
    worker.start()
    try:
        await scheduling.cancel(db.pool, booking, patient_id=ben, call_id=None)

        async def offered() -> bool:
            return bool(await outbound.list_tasks(db.pool, workspace_id, kind="waitlist_offer"))

        await eventually(offered)
    finally:
        await worker.close()
    (task,) = await outbound.list_tasks(db.pool, workspace_id, kind="waitlist_offer")
    assert task.patient_id == ada


async def test_a_periodic_job_is_one_across_processes_and_outlives_a_failed_run(
        db):
    runs: list[int] = []

    async def sweep(payload: dict) -> None:
        runs.append(1)
        if len(runs) == 1:
            raise ConnectionError("database restarting")

    kind = JobKind("sweep_for_test", sweep, every=timedelta(milliseconds=100))
    workers = [_worker(db, {kind.entrypoint: kind}) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        await asyncio.wait_for(asyncio.gather(*(w.running.wait() for w in workers)), 10)
        (job,) = await jobs.list_jobs(db.pool, entrypoint="sweep_for_test")
        assert job.dedupe_key == periodic_key("sweep_for_test")

        async def ran_three_times() -> bool:
            return len(runs) >= 3

        await eventually(ran_three_times)
    finally:
        for worker in workers:
            await worker.close()
    (job,) = await jobs.list_jobs(db.pool, entrypoint="sweep_for_test")
    assert job.status == "queued"  # waiting for its next run, never held as failed
