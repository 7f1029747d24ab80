"""The practice_push job: a booking Cliniko failed at booking time is written by its
durable job, retried with backoff; when its tries are spent (or the time went in
Cliniko first) the booking is marked failed, the review queue says what to do and the
call that booked it says so; however often it runs, Cliniko gets the booking once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta

import pytest

from call.call_session import CallLog
from db import jobs, practice_writes, world
from db import repositories as repo
from db.pool import Database
from db.writer import CallRecordWriter
from runner.job_retries import Retries
from runner.job_worker import JobWorker
from runner.practice_push import ENTRYPOINT, Pusher, push_booking
from services.cliniko.practice import ClinikoPractice
from tests.fake_cliniko import serve_cliniko
from tests.fakes import CollectingWriter
from tests.jobs import eventually, test_worker
from tests.world import test_cliniko as cliniko_tests
from tests.world.test_cliniko import AGENT, KEY, TODAY, cliniko_clinic, fortnight, new_patient

pytestmark = pytest.mark.timeout(40)

APPOINTMENTS = "/v1/individual_appointments"
clinic = cliniko_tests.clinic  # the demo clinic in the world model


class Cliniko:
    """The fake Cliniko, the adapter pointed at it, and when each booking was posted."""

    def __init__(self, fake, ids, practice: ClinikoPractice, posts: list[float]) -> None:
        self.fake, self.ids, self.practice, self.posts = fake, ids, practice, posts

    def failing(self, times: int) -> None:
        self.fake.fail_next(503, only=f"POST {APPOINTMENTS}", count=times)


@pytest.fixture
async def cliniko(db) -> AsyncIterator[Cliniko]:
    fake, ids = cliniko_clinic()
    posts: list[float] = []
    answer = fake.handle

    async def timed(request):
        if request.method == "POST" and request.path == APPOINTMENTS:
            posts.append(asyncio.get_running_loop().time())
        return await answer(request)

    fake.handle = timed
    async with serve_cliniko(fake) as base_url:
        # The push is due at once, so the worker need not wait for the call's own try.
        practice = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT, base_url=base_url,
                                   push_delay=timedelta(0))
        try:
            yield Cliniko(fake, ids, practice, posts)
        finally:
            await practice.aclose()


@pytest.fixture
async def clean_queue(db: Database):
    await db.pool.execute("DELETE FROM pgqueuer")
    yield
    await db.pool.execute("DELETE FROM pgqueuer")


def worker(db: Database, pusher: Pusher, retries: Retries) -> JobWorker:
    async def run(payload: dict) -> None:
        await push_booking(pusher, payload, retries=retries)

    return test_worker(db, {ENTRYPOINT: retries.kind(ENTRYPOINT, run)})


async def status_of(db, appointment_id: str) -> tuple[str, str | None]:
    row = await db.pool.fetchrow(
        "SELECT practice_status, practice_error FROM appointments WHERE id = $1",
        uuid.UUID(appointment_id))
    return row["practice_status"], row["practice_error"]


async def held_booking(db, clinic, cliniko: Cliniko, *, call_id: str | None = None,
                       days: int = 1):
    """A booking Cliniko failed at booking time: held here, its push queued."""
    slot = next(s for s in await fortnight(cliniko.practice, clinic,
                                           first_day=TODAY + timedelta(days=days))
                if s.practitioner_id == clinic["people"]["Dr. Maya Patel"])
    record, _ = await new_patient(db, clinic)
    outcome = await cliniko.practice.book(slot, patient_id=record.id, call_id=call_id)
    assert outcome.practice_status == "pending"
    return outcome.appointment, slot


async def test_a_booking_cliniko_failed_is_written_by_its_job_after_backing_off(
    db, clinic, cliniko, clean_queue
):
    cliniko.failing(3)  # at booking time, then the job's first two tries
    appointment, _ = await held_booking(db, clinic, cliniko)
    retries = Retries(max_attempts=5, initial_delay=timedelta(seconds=0.2),
                      max_delay=timedelta(seconds=2))
    pushes = worker(db, Pusher(db.pool, cliniko.practice, CollectingWriter()), retries)
    pushes.start()
    try:
        await eventually(lambda: _is(status_of(db, appointment.id), ("pushed", None)))
    finally:
        await pushes.close()

    assert len(cliniko.posts) == 4 and len(cliniko.fake.appointments) == 1
    waits = [later - earlier for earlier, later in zip(cliniko.posts[1:], cliniko.posts[2:],
                                                       strict=False)]
    assert waits[0] >= 0.19 and waits[1] >= 0.39  # 0.2 s, then doubled
    assert await jobs.job_for(db.pool, practice_writes.push_key(appointment.id)) is None


async def _is(value, expected) -> bool:
    return await value == expected


async def test_when_its_tries_are_spent_the_clinic_is_told_and_a_later_retry_clears_it(
    db, clinic, cliniko, clean_queue, settings
):
    call_id = await repo.create_call(
        db.pool, workspace_id=clinic["workspace"], service_id=clinic["service"], call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    CallLog(call_id, writer).event("call_ended", reason="caller_hangup")  # the call's own
    assert await writer.flush(5)
    cliniko.failing(50)
    appointment, _ = await held_booking(db, clinic, cliniko, call_id=call_id)
    key = practice_writes.push_key(appointment.id)
    retries = Retries(max_attempts=2, initial_delay=timedelta(seconds=0.1),
                      max_delay=timedelta(seconds=0.2))
    pushes = worker(db, Pusher(db.pool, cliniko.practice, writer), retries)
    pushes.start()
    try:
        await eventually(lambda: _held(db, key))
        assert await status_of(db, appointment.id) == ("failed", "Cliniko server error (503)")
        assert len(cliniko.posts) == 4  # at booking time, then the job's three runs
        [item] = await world.review_queue(db.pool, clinic["workspace"])
        assert (item.type, item.call_id, item.entity_id) == (
            "practice_write_failed", call_id, appointment.id)
        assert item.summary.startswith("Not in Cliniko: Follow-up visit with Dr. Maya Patel "
                                       "at Downtown")
        assert item.review_action == ("Book this appointment in Cliniko by hand (Cliniko "
                                      "server error (503)).")
        assert await writer.flush(5)
        events = (await repo.get_call_detail(db.pool, call_id, clinic["workspace"]))["events"]
        assert [(e["type"], e["data"]) for e in events] == [
            ("call_ended", {"reason": "caller_hangup"}),
            ("practice_write_failed", {"practice": "cliniko", "why": "attempts_spent",
                                       "error": "Cliniko server error (503)"})]

        cliniko.fake.faults.clear()  # Cliniko is back; a person retries the held job
        assert await jobs.retry_failed(db.pool, [(await jobs.job_for(db.pool, key)).id]) == 1
        await eventually(lambda: _is(status_of(db, appointment.id), ("pushed", None)))
    finally:
        await pushes.close()
        await writer.close(timeout=5)
    assert len(cliniko.fake.appointments) == 1
    assert await world.review_queue(db.pool, clinic["workspace"]) == []  # settled


async def _held(db, key: str) -> bool:
    job = await jobs.job_for(db.pool, key)
    return job is not None and job.status == "failed"


async def test_a_push_run_twice_books_once(db, clinic, cliniko):
    cliniko.failing(1)
    appointment, _ = await held_booking(db, clinic, cliniko, days=2)
    pusher = Pusher(db.pool, cliniko.practice, CollectingWriter())
    await push_booking(pusher, {"appointment_id": appointment.id})
    # The run's own record of it is lost (a worker died before it was written).
    await db.pool.execute("UPDATE appointments SET practice_status = 'pending' WHERE id = $1",
                          uuid.UUID(appointment.id))
    await db.pool.execute("DELETE FROM external_refs WHERE entity_id = $1",
                          uuid.UUID(appointment.id))

    await push_booking(pusher, {"appointment_id": appointment.id})

    assert len(cliniko.posts) == 2 and len(cliniko.fake.appointments) == 1
    assert await status_of(db, appointment.id) == ("pushed", None)


async def test_a_time_taken_in_cliniko_before_the_push_goes_to_the_clinic_at_once(
    db, clinic, cliniko
):
    cliniko.failing(1)
    call_id = await repo.create_call(
        db.pool, workspace_id=clinic["workspace"], service_id=clinic["service"], call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    appointment, slot = await held_booking(db, clinic, cliniko, call_id=call_id, days=3)
    walk_in = cliniko.fake.add_patient("Walk", "In", date(1970, 1, 1))
    cliniko.fake.add_appointment(walk_in, cliniko.ids["Patel"], cliniko.ids["follow-up"],
                                 cliniko.ids["Downtown"], slot.starts_at)
    record = CollectingWriter()

    await push_booking(Pusher(db.pool, cliniko.practice, record), {
        "appointment_id": appointment.id})  # no retry: it would never succeed

    assert (await status_of(db, appointment.id))[0] == "failed"
    [item] = await world.review_queue(db.pool, clinic["workspace"])
    assert item.review_action.startswith("The time was taken in Cliniko before this booking "
                                         "reached it: call the patient")
    (event,) = record.events("practice_write_failed")
    assert event.call_id == call_id and event.data["why"] == "taken"
    assert len(cliniko.posts) == 1
