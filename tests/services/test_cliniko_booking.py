"""A booking reaches Cliniko when the caller says yes, against the local fake of its API:
the slot is re-checked there first, then created with the appointment's key in its
notes; a retry finds that appointment by its key and books nothing twice; a time taken
there is a conflict and nothing is written; Cliniko failing or slow holds the slot here
and leaves the write to the queued practice_push job."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from db import jobs, practice_writes, scheduling, world
from db import repositories as repo
from db.world import EventDraft, Provenance
from processors.world.verification import RulesJudges
from runner.after_call import verify_and_sync
from services.cliniko.practice import ClinikoPractice
from services.practice.base import BookingMade, SlotConflict, TakenThere
from tests.world import test_cliniko as cliniko_tests
from tests.world.conftest import transcript
from tests.world.test_cliniko import (
    AGENT,
    KEY,
    TODAY,
    external_id,
    fortnight,
    live_at,
    new_patient,
)

pytestmark = pytest.mark.timeout(30)

APPOINTMENTS = "/v1/individual_appointments"
# The demo clinic in the world model and its twin in the fake Cliniko.
clinic = cliniko_tests.clinic
cliniko = cliniko_tests.cliniko


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def a_slot(practice, clinic, days: int, doctor: str = "Dr. Maya Patel"):
    return next(s for s in await fortnight(practice, clinic, first_day=TODAY + timedelta(
        days=days)) if s.practitioner_id == clinic["people"][doctor])


async def practice_state(db, appointment_id: str) -> tuple[str, str | None]:
    row = await db.pool.fetchrow(
        "SELECT practice_status, practice_error FROM appointments WHERE id = $1",
        uuid.UUID(appointment_id))
    return row["practice_status"], row["practice_error"]


async def queued_push(db, appointment_id: str) -> jobs.JobRow | None:
    return await jobs.job_for(db.pool, practice_writes.push_key(appointment_id))


def impatient(db, fake, **kwargs) -> ClinikoPractice:
    """The adapter waiting only 0.3 s for Cliniko at each step of a booking."""
    return ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT, base_url=fake.base_url,
                           booking_wait_s=0.3, **kwargs)


async def test_a_yes_rechecks_the_slot_in_cliniko_then_creates_it_with_its_key(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    slot = await a_slot(practice, clinic, 1)
    record, _ = await new_patient(db, clinic)
    fake.requests.clear()

    outcome = await practice.book(slot, patient_id=record.id, call_id=None)

    assert isinstance(outcome, BookingMade) and outcome.practice_status == "pushed"
    appointment = outcome.appointment
    paths = [(r.method, r.path) for r in fake.requests]
    recheck = next(i for i, (m, p) in enumerate(paths) if p.endswith("/available_times"))
    [create] = fake.received("POST", APPOINTMENTS)
    assert recheck < paths.index(("POST", APPOINTMENTS))  # asked again before writing
    day = slot.starts_at.date().isoformat()
    assert fake.requests[recheck].params("from") == [day] == fake.requests[recheck].params("to")
    assert create.body["starts_at"] == stamp(slot.starts_at)
    assert create.body["practitioner_id"] == ids["Patel"]
    assert create.body["business_id"] == ids["Downtown"]
    assert f"voice-agent-{appointment.id}" in create.body["notes"]
    made = await external_id(db, "appointments", appointment.id)
    assert made in fake.appointments and fake.appointments[made]["patient_id"] == (
        await external_id(db, "patients", record.id))
    assert await practice_state(db, appointment.id) == ("pushed", None)
    assert await queued_push(db, appointment.id) is None  # written: no job left to run


async def test_a_retried_write_finds_the_booking_by_its_key_and_books_nothing_twice(
    db, clinic, cliniko
):
    fake, _, _ = cliniko
    practice = impatient(db, fake)
    try:
        slot = await a_slot(practice, clinic, 2)
        record, _ = await new_patient(db, clinic)
        # Cliniko makes the appointment, but its answer comes too late for the call.
        fake.fail_next(None, delay_s=1.5, only=f"POST {APPOINTMENTS}")

        outcome = await practice.book(slot, patient_id=record.id, call_id=None)
        assert outcome.practice_status == "pending" and "did not answer" in outcome.deferred
        assert await external_id(db, "appointments", outcome.appointment.id) is None

        written = await practice.write_booking(outcome.appointment.id)
        again = await practice.write_booking(outcome.appointment.id)
    finally:
        await practice.aclose()
    [theirs] = fake.appointments
    assert (written.status, written.external_id) == ("already_there", theirs)
    assert (again.status, again.external_id) == ("already_there", theirs)
    assert len(fake.received("POST", APPOINTMENTS)) == 1
    assert await external_id(db, "appointments", outcome.appointment.id) == theirs


async def test_a_time_taken_in_cliniko_is_a_conflict_and_nothing_is_held_or_queued(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    slot = await a_slot(practice, clinic, 3)
    walk_in = fake.add_patient("Walk", "In", date(1970, 1, 1))
    fake.add_appointment(walk_in, ids["Patel"], ids["follow-up"], ids["Downtown"],
                         slot.starts_at)
    record, _ = await new_patient(db, clinic)
    pushes = len(await jobs.list_jobs(db.pool, entrypoint="practice_push", limit=10_000))

    outcome = await practice.book(slot, patient_id=record.id, call_id=None)

    assert outcome == SlotConflict(slot, "cliniko")
    assert await live_at(db, slot) == 0 and not fake.received("POST", APPOINTMENTS)
    assert len(await jobs.list_jobs(db.pool, entrypoint="practice_push",
                                    limit=10_000)) == pushes


@pytest.mark.parametrize("failing", [f"POST {APPOINTMENTS}", "GET /v1/patients"])
async def test_a_cliniko_server_error_holds_the_slot_and_queues_its_push(
    db, clinic, cliniko, failing
):
    fake, _, practice = cliniko
    slot = await a_slot(practice, clinic, 4)
    record, _ = await new_patient(db, clinic)
    fake.fail_next(503, only=failing)

    outcome = await practice.book(slot, patient_id=record.id, call_id=None)

    assert outcome.practice_status == "pending" and "server error (503)" in outcome.deferred
    assert await live_at(db, slot) == 1  # held: nobody else is offered it here
    assert await practice_state(db, outcome.appointment.id) == (
        "pending", "Cliniko server error (503)")
    job = await queued_push(db, outcome.appointment.id)
    assert job.status == "queued" and job.payload == {"appointment_id": outcome.appointment.id}
    assert job.execute_after > datetime.now(UTC)  # after the write at booking time had its go
    assert not fake.appointments


async def test_cliniko_not_answering_the_recheck_holds_the_slot_and_leaves_it_to_the_job(
    db, clinic, cliniko
):
    fake, _, _ = cliniko
    practice = impatient(db, fake)
    try:
        slot = await a_slot(practice, clinic, 5)
        record, _ = await new_patient(db, clinic)
        fake.fail_next(None, delay_s=1.0)  # the re-check's available times

        outcome = await practice.book(slot, patient_id=record.id, call_id=None)
    finally:
        await practice.aclose()
    assert outcome.practice_status == "pending" and await live_at(db, slot) == 1
    assert not fake.received("POST", APPOINTMENTS)  # never written unchecked
    assert (await queued_push(db, outcome.appointment.id)).status == "queued"


async def test_the_push_job_rechecks_and_a_time_taken_meanwhile_is_never_double_booked(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    slot = await a_slot(practice, clinic, 6)
    record, _ = await new_patient(db, clinic)
    fake.fail_next(503, only=f"POST {APPOINTMENTS}")
    held = (await practice.book(slot, patient_id=record.id, call_id=None)).appointment
    walk_in = fake.add_patient("Walk", "In", date(1970, 1, 1))
    fake.add_appointment(walk_in, ids["Patel"], ids["follow-up"], ids["Downtown"],
                         slot.starts_at)

    with pytest.raises(TakenThere):
        await practice.write_booking(held.id)

    assert len(fake.received("POST", APPOINTMENTS)) == 1  # the failed one at booking time
    assert len(fake.appointments) == 1


async def test_a_booking_cancelled_before_it_reached_cliniko_is_not_written(db, clinic, cliniko):
    fake, _, practice = cliniko
    slot = await a_slot(practice, clinic, 7)
    record, _ = await new_patient(db, clinic)
    fake.fail_next(503, only=f"POST {APPOINTMENTS}")
    held = (await practice.book(slot, patient_id=record.id, call_id=None)).appointment
    await scheduling.cancel(db.pool, held.id, patient_id=record.id, call_id=None)

    outcome = await practice.write_booking(held.id)

    assert outcome.external_id is None and not fake.appointments
    assert len(fake.received("POST", APPOINTMENTS)) == 1


async def test_a_reschedule_books_the_new_time_and_cancels_the_old_in_cliniko_at_once(
    db, clinic, cliniko
):
    fake, _, practice = cliniko
    record, _ = await new_patient(db, clinic)
    first = await a_slot(practice, clinic, 8)
    old = (await practice.book(first, patient_id=record.id, call_id=None)).appointment
    second = await a_slot(practice, clinic, 9)

    moved = await practice.book(second, patient_id=record.id, call_id=None, replaces=old.id)

    assert moved.practice_status == "pushed"
    old_there = await external_id(db, "appointments", old.id)
    new_there = await external_id(db, "appointments", moved.appointment.id)
    assert fake.appointments[old_there]["cancelled_at"]
    assert not fake.appointments[new_there]["cancelled_at"]
    assert len(fake.received("PATCH")) == 1


async def test_a_flagged_booking_already_in_cliniko_goes_to_review_with_what_to_check(
    db, clinic, cliniko
):
    fake, _, practice = cliniko
    patient, _ = await new_patient(db, clinic)  # born 1980-05-17
    call_id = await clinic_call(db, clinic)
    slot = await a_slot(practice, clinic, 10)
    booked = (await practice.book(slot, patient_id=patient.id, call_id=call_id)).appointment
    await booking_event(db, clinic, call_id, booked)
    said = "Hi, it's Nora Quinn, born May 7th 1980, and I'd like a follow-up visit please"
    await transcript(db, call_id, ("caller", said))
    posts = len(fake.received("POST"))

    report, synced = await verify_and_sync(db.pool, call_id, RulesJudges(), practice,
                                           today=TODAY)

    [flagged] = await review_items(db, clinic)
    assert flagged.id in report.flagged and flagged.type == "appointment_booked"
    assert flagged.review_action.startswith("Check the booking in Cliniko: the caller gave "
                                            "a date of birth (1980-05-07)")
    assert synced.pushed == 0 and len(fake.received("POST")) == posts  # nothing else sent


async def clinic_call(db, clinic) -> str:
    return await repo.create_call(
        db.pool, workspace_id=clinic["workspace"], service_id=clinic["service"], call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")


async def booking_event(db, clinic, call_id: str, appointment) -> str:
    """The clinical event the booking tool writes for a booking the caller confirmed."""
    return await world.write_event(db.pool, clinic["workspace"], EventDraft(
        "appointment_booked", f"Booked: {appointment.type_name}.",
        {"appointment_id": appointment.id, "starts_at": appointment.starts_at.isoformat()},
        appointment.patient_id, "appointments", appointment.id),
        Provenance("tool", "tool:CreateAppointment", "high", call_id))


async def review_items(db, clinic):
    return [e for e in await world.review_queue(db.pool, clinic["workspace"], limit=500)
            if e.review_action]
