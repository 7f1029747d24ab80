"""The post_call job: a finished call's writes are verified and synced by its durable job
(one per call); a run that cannot finish says so on the call's record, after the call's
own events, is retried, and is held as failed once its tries are spent."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from call.call_session import CallLog
from db import jobs, world
from db import repositories as repo
from db.deadline import DatabaseUnavailable
from db.pool import Database
from processors.world.verification import RulesJudges
from runner.job_retries import Retries
from runner.job_worker import JobWorker
from runner.post_call import ENTRYPOINT, AfterCall, post_call_key, queue_post_call, run_post_call
from runner.runtime import AppRuntime
from services.practice.builtin import BuiltinPractice
from tests.fakes import CollectingWriter
from tests.jobs import held_failed, test_worker, work_until
from tests.world import conftest as world_fixtures
from tests.world.conftest import transcript
from tests.world.test_verification import BrokenJudges, reported

pytestmark = pytest.mark.timeout(40)

clinic = world_fixtures.clinic  # the demo clinic with its charts


@pytest.fixture
async def clean_queue(db: Database):
    await db.pool.execute("DELETE FROM pgqueuer")
    yield
    await db.pool.execute("DELETE FROM pgqueuer")


def worker(db: Database, parts: AfterCall, retries: Retries) -> JobWorker:
    async def run(payload: dict) -> None:
        await run_post_call(parts, payload, retries=retries)

    return test_worker(db, {ENTRYPOINT: retries.kind(ENTRYPOINT, run)})


async def test_a_finished_calls_writes_are_verified_and_synced_by_its_job(
    db, clinic, stored_writer, clean_queue
):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    said = "My new phone number is three one two, five five five, zero one nine nine"
    await transcript(db, call_id, ("caller", said))
    await reported(db, clinic, call_id, walsh.id, "contact_reported",
                   "Caller reported new contact details: phone 312-555-0199.",
                   {"changes": {"phone": "312-555-0199"}})
    assert await queue_post_call(db.pool, call_id) is not None
    assert await queue_post_call(db.pool, call_id) is None  # one job per call
    retries = Retries(max_attempts=2, initial_delay=timedelta(seconds=0.1),
                      max_delay=timedelta(seconds=0.2))
    jobs_here = worker(db, AfterCall(db.pool, stored_writer, RulesJudges(),
                                     BuiltinPractice(db.pool)),
                       retries)
    await work_until(jobs_here, lambda: _verified(db, call_id))

    [change] = await world.call_events(db.pool, call_id)
    assert (change.verification, change.confidence) == ("corrected", "verified")
    assert (await world.patient_record(db.pool, walsh.id)).phone == "+13125550199"  # synced
    assert await jobs.job_for(db.pool, post_call_key(call_id)) is None  # done


async def _verified(db, call_id: str) -> bool:
    return await world.latest_verification(db.pool, call_id) is not None and not await (
        db.pool.fetchval("SELECT count(*) FROM clinical_events WHERE call_id = $1::uuid AND "
                         "synced_at IS NULL", call_id))


async def test_a_post_call_job_that_cannot_finish_says_so_on_the_call_each_try_then_is_held(
    db, clinic, stored_writer, clean_queue
):
    call_id = await clinic.call(db)
    await transcript(db, call_id, ("caller", "My number is 312 555 0199"))
    own = CallLog(call_id, stored_writer)  # the call's own record, already written
    own.event("call_ended", reason="caller_hangup")
    own.event("bad_input_total", count=0)
    assert await stored_writer.flush(5)
    await queue_post_call(db.pool, call_id)
    retries = Retries(max_attempts=1, initial_delay=timedelta(seconds=0.1),
                      max_delay=timedelta(seconds=0.2))
    jobs_here = worker(db, AfterCall(db.pool, stored_writer, BrokenJudges("fail"),
                                     BuiltinPractice(db.pool)), retries)
    await work_until(jobs_here, lambda: held_failed(db, post_call_key(call_id)))

    assert await stored_writer.flush(5)
    events = (await repo.get_call_detail(db.pool, call_id, clinic.workspace_id))["events"]
    assert [(e["type"], e["data"]) for e in events] == [
        ("call_ended", {"reason": "caller_hangup"}), ("bad_input_total", {"count": 0}),
        ("verification_failed", {"error": "RuntimeError", "will_retry": True}),
        ("verification_failed", {"error": "RuntimeError"})]
    assert await world.latest_verification(db.pool, call_id) is None


class QueueDown:
    """The database as the runtime sees it when the job queue cannot take the job."""

    def __init__(self, pool) -> None:
        self.pool = pool

    async def bounded(self, work, *, what: str, timeout: float | None = None):
        work.close()
        raise DatabaseUnavailable(what, "timed out", timed_out=True)


async def test_a_post_call_job_that_cannot_be_queued_runs_here_and_the_call_says_so(
    db, clinic, settings
):
    call_id = await clinic.call(db)
    await transcript(db, call_id, ("caller", "Hi, I'd like to check my appointment please"))
    record = CollectingWriter()
    runtime = SimpleNamespace(db=QueueDown(db.pool), verifier=RulesJudges(),
                              practice=BuiltinPractice(db.pool), settings=settings)

    await AppRuntime._queue_post_call(runtime, call_id, CallLog(call_id, record))

    assert [e.type for e in record.events()] == ["post_call_not_queued"]
    assert await world.latest_verification(db.pool, call_id) is not None  # verified anyway
    assert await jobs.job_for(db.pool, post_call_key(call_id)) is None
