"""The `reminder_text` job against the Twilio stand-in: the reminder goes once, from the
clinic's number, with the appointment in its location's time and the visit's links; an
appointment cancelled meanwhile gets nothing; a refusal that cannot change ends the job,
Twilio unavailable has it retried."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from db import jobs, scheduling, visit_links
from db import text_messages as texts
from db.reminder_campaigns import put_campaign
from db.reminder_texts import TEXT_JOB, text_key
from db.reminders import sweep_reminders
from flows.post_booking_tools import written_time
from flows.reach import Reach
from flows.texting import Texter
from runner.job_kinds import job_kinds
from runner.reminder_texts import ReminderNotSent, send_reminder_text
from services.twilio.messages import TwilioMessages
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.db.small_clinic import CHICAGO, SmallClinic, small_clinic

NOW = datetime(2027, 1, 4, 10, 0, tzinfo=CHICAGO)  # a Monday morning
STARTS = NOW + timedelta(hours=23)  # Tuesday 9 AM


class Texting(SimpleNamespace):
    clinic: SmallClinic
    number: str  # the clinic's, to text from
    twilio: FakeTwilioRest
    runtime: SimpleNamespace


@pytest.fixture
async def texting(db, workspace_id):
    clinic = await small_clinic(db, workspace_id)
    number = f"+1555018{uuid.uuid4().int % 10_000:04d}"
    await db.pool.execute("INSERT INTO service_numbers (phone_number, service_id) "
                          "VALUES ($1, $2)", number, uuid.UUID(clinic.service_id))
    await put_campaign(db.pool, workspace_id, clinic.service_id, enabled=True, lead_hours=24,
                       appointment_type_ids=(), channel="text")
    twilio = FakeTwilioRest()
    twilio.add_number(number)
    async with serve_twilio_rest(twilio):
        reach = Reach(texter=Texter(db.pool, TwilioMessages(twilio.account())))
        runtime = SimpleNamespace(db=SimpleNamespace(pool=db.pool), reach=reach,
                                  clock=lambda: NOW)
        yield Texting(clinic=clinic, number=number, twilio=twilio, runtime=runtime)


async def booked(db, clinic: SmallClinic, first: str = "Ada") -> tuple[str, str]:
    """A booking tomorrow at 9 AM: (its id, the patient's phone)."""
    patient = await clinic.patient(first)
    phone = await db.pool.fetchval("SELECT phone FROM patients WHERE id = $1",
                                   uuid.UUID(patient))
    return await clinic.book(patient, STARTS), phone


async def reminders_of(db, appointment_id: str) -> list[dict]:
    rows = await db.pool.fetch(
        "SELECT status, error_code FROM text_messages WHERE appointment_id = $1 "
        "AND kind = 'reminder'", uuid.UUID(appointment_id))
    return [dict(row) for row in rows]


async def test_the_swept_reminder_is_texted_once_from_the_clinics_number(db, texting):
    booking, phone = await booked(db, texting.clinic)
    terms = await visit_links.terms(db.pool, booking)
    await visit_links.keep(db.pool, terms, "video", provider="link",
                           url="https://video.example/room-1")
    await sweep_reminders(db.pool, NOW, interval=timedelta(minutes=5))
    job = await jobs.job_for(db.pool, text_key(booking))

    await send_reminder_text(texting.runtime, job.payload)
    await send_reminder_text(texting.runtime, job.payload)  # run again: nothing more

    (text,) = texting.twilio.texts.to(phone)
    assert text.resource["from"] == texting.number
    appointment = await scheduling.get_appointment(db.pool, booking)
    assert written_time(appointment) == "Tue 5 Jan at 9:00 AM"  # Chicago, the location's
    clinic_name = await db.pool.fetchval("SELECT name FROM services WHERE id = $1",
                                         uuid.UUID(texting.clinic.service_id))
    assert text.body == (
        f"{clinic_name}: a reminder of your physiotherapy session with Aisha Rahman at Main "
        "Street on Tue 5 Jan at 9:00 AM.\nVideo visit: https://video.example/room-1\n"
        "Reply STOP to stop texts.")
    assert await reminders_of(db, booking) == [{"status": "queued", "error_code": None}]
    await jobs.cancel(db.pool, [job.id])  # as a finished job, it leaves the queue
    await sweep_reminders(db.pool, NOW + timedelta(minutes=5), interval=timedelta(minutes=5))
    assert await jobs.job_for(db.pool, text_key(booking)) is None  # texted: no second job


async def test_an_appointment_cancelled_before_its_reminder_gets_none(db, texting):
    booking, phone = await booked(db, texting.clinic)
    appointment = await scheduling.get_appointment(db.pool, booking)
    await scheduling.cancel(db.pool, booking, patient_id=appointment.patient_id, call_id=None)

    await send_reminder_text(texting.runtime, {"appointment_id": booking})

    assert texting.twilio.texts.to(phone) == []
    assert await reminders_of(db, booking) == []


async def test_a_patient_who_texted_stop_since_the_sweep_gets_none(db, texting):
    booking, phone = await booked(db, texting.clinic)
    await texts.opt_out(db.pool, texting.clinic.workspace_id, phone)

    await send_reminder_text(texting.runtime, {"appointment_id": booking})

    assert texting.twilio.texts.to(phone) == []


async def test_a_number_that_cannot_take_texts_ends_the_job_without_a_retry(db, texting):
    booking, phone = await booked(db, texting.clinic)
    texting.twilio.fail_next(400, 21614)  # a landline

    await send_reminder_text(texting.runtime, {"appointment_id": booking})  # no raise

    assert texting.twilio.texts.to(phone) == []
    assert await reminders_of(db, booking) == [{"status": "refused", "error_code": 21614}]


async def test_twilio_unavailable_has_the_job_retried_and_the_retry_sends_it(db, texting):
    booking, phone = await booked(db, texting.clinic)
    texting.twilio.fail_next(503)

    with pytest.raises(ReminderNotSent):
        await send_reminder_text(texting.runtime, {"appointment_id": booking})
    assert texting.twilio.texts.to(phone) == []
    await send_reminder_text(texting.runtime, {"appointment_id": booking})

    assert len(texting.twilio.texts.to(phone)) == 1
    assert await reminders_of(db, booking) == [{"status": "queued", "error_code": None}]


async def test_without_texting_set_up_the_job_ends_and_sends_nothing(db, texting):
    booking, phone = await booked(db, texting.clinic)
    runtime = SimpleNamespace(db=texting.runtime.db, reach=Reach(), clock=lambda: NOW)

    await send_reminder_text(runtime, {"appointment_id": booking})

    assert texting.twilio.texts.to(phone) == []


async def test_the_service_retries_a_reminder_text_five_times(settings):
    kind = job_kinds(SimpleNamespace(settings=settings))[TEXT_JOB]
    assert (kind.max_attempts, kind.initial_delay) == (5, timedelta(minutes=1))
