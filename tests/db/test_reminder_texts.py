"""A campaign that texts: the sweep queues one `reminder_text` job per covered appointment,
however often it runs, due its lead time before the appointment and never at night; a
patient who texted STOP gets none, one who asked not to be called still does; what the
job reads when it runs says whether a text is still to go."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from db import jobs, outbound, scheduling
from db import text_messages as texts
from db.reminder_campaigns import put_campaign
from db.reminder_texts import TEXT_JOB, text_key, to_send
from db.reminders import sweep_reminders
from tests.db.small_clinic import CHICAGO, SmallClinic, small_clinic

NOW = datetime(2027, 1, 4, 10, 0, tzinfo=CHICAGO)  # a Monday morning
SWEEP = timedelta(minutes=5)


@pytest.fixture
async def clinic(db, workspace_id) -> SmallClinic:
    return await small_clinic(db, workspace_id)


async def texts_by(clinic: SmallClinic, *, lead_hours: int = 24,
                   types: tuple[str, ...] = ()) -> None:
    await put_campaign(clinic.db.pool, clinic.workspace_id, clinic.service_id, enabled=True,
                       lead_hours=lead_hours, appointment_type_ids=types, channel="text")


async def text_job(db, appointment_id: str) -> jobs.JobRow | None:
    return await jobs.job_for(db.pool, text_key(appointment_id))


def delay_of(job: jobs.JobRow) -> timedelta:
    return job.execute_after - job.created


async def test_each_covered_appointment_gets_one_text_job_however_often_the_sweep_runs(
        db, clinic):
    await texts_by(clinic, types=(clinic.physio,))
    tomorrow_early = NOW + timedelta(hours=20)  # Tuesday 6 AM: all within the lead time

    def at(n: int) -> datetime:
        return tomorrow_early + timedelta(minutes=30 * n)

    ada = await clinic.book(await clinic.patient("Ada"), at(0))
    quiet = await clinic.book(await clinic.patient("Quinn", do_not_call=True), at(1))
    stopped_patient = await clinic.patient("Stella")
    stopped = await clinic.book(stopped_patient, at(2))
    await texts.opt_out(db.pool, clinic.workspace_id, await db.pool.fetchval(
        "SELECT phone FROM patients WHERE id = $1", uuid.UUID(stopped_patient)))
    phoneless = await clinic.book(await clinic.patient("Nia", phone=False), at(3))
    flu = await clinic.book(await clinic.patient("Cleo"), at(4), kind=clinic.flu_shot,
                            minutes=15)
    dan = await clinic.patient("Dan")
    gone = await clinic.book(dan, at(5))
    await scheduling.cancel(db.pool, gone, patient_id=dan, call_id=None)
    later = await clinic.book(await clinic.patient("Ben"), NOW + timedelta(hours=30))

    first = await sweep_reminders(db.pool, NOW, interval=SWEEP)
    again = await sweep_reminders(db.pool, NOW + timedelta(minutes=1), interval=SWEEP)

    queued = {a: await text_job(db, a) for a in (ada, quiet)}
    assert all(job is not None and job.entrypoint == TEXT_JOB for job in queued.values())
    assert {job.payload["appointment_id"] for job in queued.values()} == {ada, quiet}
    assert {job.id for job in queued.values()} <= set(first.text_jobs)
    assert not {job.id for job in queued.values()} & set(again.text_jobs)
    for skipped in (stopped, phoneless, flu, gone, later):
        assert await text_job(db, skipped) is None
    calls = await outbound.list_tasks(db.pool, clinic.workspace_id, kind="reminder")
    assert calls == []  # a campaign that texts makes no call


async def test_the_text_is_due_its_lead_time_before_the_appointment(db, clinic):
    await texts_by(clinic)
    starts = NOW + timedelta(hours=30)  # Tuesday 4 PM
    booking = await clinic.book(await clinic.patient("Ben"), starts)

    await sweep_reminders(db.pool, starts - timedelta(hours=24, minutes=10), interval=SWEEP)
    assert await text_job(db, booking) is None
    await sweep_reminders(db.pool, starts - timedelta(hours=24, minutes=2), interval=SWEEP)

    job = await text_job(db, booking)
    assert abs(delay_of(job) - timedelta(minutes=2)) < timedelta(seconds=5)


async def test_a_text_due_at_night_waits_for_the_morning_and_never_comes_too_late(db, clinic):
    await texts_by(clinic, lead_hours=3)
    tuesday_8 = datetime(2027, 1, 5, 8, 0, tzinfo=CHICAGO)  # the clinic opens at 8 AM
    early = await clinic.book(await clinic.patient("Ada"), tuesday_8 + timedelta(minutes=30))
    at_opening = await clinic.book(await clinic.patient("Ben"), tuesday_8,
                                   kind=clinic.flu_shot, minutes=15)
    night = datetime(2027, 1, 5, 5, 28, tzinfo=CHICAGO)

    await sweep_reminders(db.pool, night, interval=SWEEP)

    job = await text_job(db, early)
    assert abs(delay_of(job) - (tuesday_8 - night)) < timedelta(seconds=5)  # 8 AM, not 5:30
    assert await text_job(db, at_opening) is None  # 8 AM is the appointment itself


async def test_a_call_campaign_queues_no_text_and_an_appointment_texted_is_not_called(
        db, clinic):
    await put_campaign(db.pool, clinic.workspace_id, clinic.service_id, enabled=True,
                       lead_hours=24, appointment_type_ids=())
    called = await clinic.book(await clinic.patient("Ada"), NOW + timedelta(hours=23))
    texted_patient = await clinic.patient("Ben")
    texted = await clinic.book(texted_patient, NOW + timedelta(hours=22))
    await texts.begin(db.pool, workspace_id=clinic.workspace_id, kind="reminder",
                      to="+15550209999", from_=None, body="A reminder.",
                      patient_id=texted_patient, appointment_id=texted)

    swept = await sweep_reminders(db.pool, NOW, interval=SWEEP)

    assert await text_job(db, called) is None
    tasks = await outbound.list_tasks(db.pool, clinic.workspace_id, kind="reminder")
    assert [t.appointment_id for t in tasks] == [called] and tasks[0].id in swept.tasks


async def test_a_deployment_that_cannot_text_queues_nothing_and_names_the_clinic(db, clinic):
    await texts_by(clinic)
    booking = await clinic.book(await clinic.patient("Ada"), NOW + timedelta(hours=23))

    swept = await sweep_reminders(db.pool, NOW, interval=SWEEP, can_text=False)

    assert clinic.service_id in swept.untexted
    assert await text_job(db, booking) is None


async def test_what_the_job_reads_follows_the_appointment_and_the_campaign(db, clinic):
    await texts_by(clinic)
    await db.pool.execute("INSERT INTO service_numbers (phone_number, service_id) "
                          "VALUES ($1, $2)", f"+1555019{uuid.uuid4().int % 10_000:04d}",
                          uuid.UUID(clinic.service_id))
    ada = await clinic.patient("Ada")
    booking = await clinic.book(ada, NOW + timedelta(hours=23))

    reminder = await to_send(db.pool, booking, NOW)
    assert (reminder.patient_id, reminder.appointment.id) == (ada, booking)
    assert reminder.clinic_number is not None and reminder.clinic_name.startswith("clinic-")
    assert await to_send(db.pool, booking, NOW + timedelta(hours=23)) is None  # under way

    await put_campaign(db.pool, clinic.workspace_id, clinic.service_id, enabled=True,
                       lead_hours=24, appointment_type_ids=())
    assert await to_send(db.pool, booking, NOW) is None  # the clinic calls instead now
    await texts_by(clinic)
    await scheduling.cancel(db.pool, booking, patient_id=ada, call_id=None)
    assert await to_send(db.pool, booking, NOW) is None
