"""The scheduling world model: the demo clinic, open slots, and booking writes that never clash."""

import asyncio
import uuid
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from db import repositories as repo
from db import scheduling as sched
from db import world
from db.seed import seed_clinic
from db.world import Provenance

ZONE = ZoneInfo("America/Chicago")
TODAY = date(2026, 11, 23)  # a Monday
NOW = datetime.combine(TODAY, time(7), ZONE)


@pytest.fixture
async def clinic(db, workspace_id):
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    assert await seed_clinic(db.pool, workspace_id, service["id"], TODAY)
    return workspace_id, service["id"]


async def type_named(db, service_id: str, name: str) -> sched.AppointmentType:
    return next(t for t in await sched.appointment_types(db.pool, service_id) if t.name == name)


async def fortnight(db, service_id: str, type_name: str, **filters) -> list:
    kind = await type_named(db, service_id, type_name)
    return await sched.available_slots(
        db.pool, service_id, appointment_type=kind, first_day=TODAY,
        last_day=TODAY + timedelta(days=13), now=NOW, **filters,
    )


async def test_the_demo_clinic_is_seeded_once(db, clinic):
    workspace_id, service_id = clinic
    assert not await seed_clinic(db.pool, workspace_id, service_id, TODAY)
    counts = await db.pool.fetchrow(
        """SELECT (SELECT count(*) FROM locations WHERE service_id = $1) AS locations,
                  (SELECT count(*) FROM practitioners WHERE service_id = $1) AS practitioners,
                  (SELECT count(*) FROM appointment_types WHERE service_id = $1) AS types,
                  (SELECT count(*) FROM patients WHERE workspace_id = $2) AS patients""",
        uuid.UUID(service_id), uuid.UUID(workspace_id),
    )
    assert dict(counts) == {"locations": 2, "practitioners": 10, "types": 6, "patients": 9}
    family = await sched.patients_by_phone(db.pool, workspace_id, "+15550100202")
    assert [p.first_name for p in family] == ["Elena", "Lucas", "Robert"]


async def test_a_booked_time_is_not_offered_and_the_rest_of_the_day_is(db, clinic):
    workspace_id, service_id = clinic
    margaret = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100201"))[0]
    booked = (await sched.upcoming_appointments(db.pool, margaret.id, NOW))[0]
    assert (booked.practitioner_name, booked.type_name) == ("Dr. Maya Patel", "Follow-up visit")
    slots = await fortnight(db, service_id, "Follow-up visit")
    patel_that_day = [
        s.starts_at for s in slots
        if s.practitioner_name == "Dr. Maya Patel" and s.starts_at.date() == booked.starts_at.date()
    ]
    assert booked.starts_at not in patel_that_day
    assert booked.ends_at in patel_that_day  # the next slot on the grid is open
    assert all(s.starts_at >= NOW for s in slots)


async def test_two_callers_confirming_the_same_slot_get_it_once(db, clinic):
    workspace_id, service_id = clinic
    slot = (await fortnight(db, service_id, "Annual physical"))[0]
    priya = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100204"))[0]
    margaret = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100201"))[0]
    results = await asyncio.gather(
        sched.book(db.pool, slot, patient_id=priya.id, call_id=None),
        sched.book(db.pool, slot, patient_id=margaret.id, call_id=None),
        return_exceptions=True,
    )
    assert sum(isinstance(r, sched.Appointment) for r in results) == 1
    assert sum(isinstance(r, sched.SlotTaken) for r in results) == 1
    assert slot.starts_at not in [s.starts_at for s in await fortnight(
        db, service_id, "Annual physical", practitioner_id=slot.practitioner_id)]


@pytest.mark.parametrize(("table", "column"), [("practitioners", "practitioner_id"),
                                             ("locations", "location_id"),
                                             ("appointment_types", "appointment_type_id")])
async def test_a_slot_offered_before_its_practitioner_place_or_type_was_retired_is_not_booked(
    db, clinic, table, column
):
    workspace_id, service_id = clinic
    slot = (await fortnight(db, service_id, "Annual physical"))[0]
    priya = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100204"))[0]
    await db.pool.execute(f"UPDATE {table} SET retired_at = now() WHERE id = $1",
                          uuid.UUID(getattr(slot, column)))

    with pytest.raises(sched.SlotTaken):  # the caller is offered the next open time
        await sched.book(db.pool, slot, patient_id=priya.id, call_id=None)

    assert slot.starts_at not in [a.starts_at for a in await sched.upcoming_appointments(
        db.pool, priya.id, NOW)]


async def test_a_patient_can_cancel_only_their_own_appointment(db, clinic):
    workspace_id, _ = clinic
    david = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100203"))[0]
    priya = (await sched.patients_by_phone(db.pool, workspace_id, "+15550100204"))[0]
    first, second = await sched.upcoming_appointments(db.pool, david.id, NOW)
    with pytest.raises(sched.NotFound):
        await sched.cancel(db.pool, first.id, patient_id=priya.id, call_id=None)
    cancelled = await sched.cancel(db.pool, first.id, patient_id=david.id, call_id=None)
    assert cancelled.status == "cancelled"
    assert [a.id for a in await sched.upcoming_appointments(db.pool, david.id, NOW)] == [second.id]
    with pytest.raises(sched.NotFound):  # already cancelled
        await sched.cancel(db.pool, first.id, patient_id=david.id, call_id=None)


async def test_a_reschedule_moves_the_booking_or_leaves_it_untouched(db, clinic):
    workspace_id, service_id = clinic
    elena = next(p for p in await sched.patients_by_phone(db.pool, workspace_id, "+15550100202")
                 if p.first_name == "Elena")
    old = (await sched.upcoming_appointments(db.pool, elena.id, NOW))[0]
    free, taken_by_other = (await fortnight(db, service_id, "Physiotherapy session"))[:2]
    robert = next(p for p in await sched.patients_by_phone(db.pool, workspace_id, "+15550100202")
                  if p.first_name == "Robert")
    await sched.book(db.pool, taken_by_other, patient_id=robert.id, call_id=None)
    with pytest.raises(sched.SlotTaken):
        await sched.book(
            db.pool, taken_by_other, patient_id=elena.id, call_id=None, replaces=old.id
        )
    assert [a.id for a in await sched.upcoming_appointments(db.pool, elena.id, NOW)] == [old.id]
    moved = await sched.book(db.pool, free, patient_id=elena.id, call_id=None, replaces=old.id)
    upcoming = await sched.upcoming_appointments(db.pool, elena.id, NOW)
    assert [a.id for a in upcoming] == [moved.id] and moved.starts_at == free.starts_at


async def test_the_same_name_and_birth_date_is_the_same_patient(db, clinic):
    workspace_id, _ = clinic
    written = Provenance("tool", "tool:CreatePatient", "moderate")
    again, created, event = await world.create_patient(
        db.pool, workspace_id, first_name="priya", last_name="NAIR",
        date_of_birth=date(1985, 9, 30), phone=None, email=None, address=None,
        provenance=written,
    )
    assert not created and event is None and again.full_name == "Priya Nair"
    new, created, event = await world.create_patient(
        db.pool, workspace_id, first_name="Sam", last_name="Nair",
        date_of_birth=date(1985, 9, 30), phone="+15550100299", email=None, address=None,
        provenance=written,
    )
    assert created and event is not None and new.id != again.id


async def add_closure(db, service_id: str, first: date, last: date, reason: str,
                      location: str | None = None) -> None:
    location_id = None
    if location is not None:
        location_id = await db.pool.fetchval(
            "SELECT id FROM locations WHERE service_id = $1 AND name = $2",
            uuid.UUID(service_id), location)
    await db.pool.execute(
        """INSERT INTO closures (service_id, location_id, starts_on, ends_on, reason)
           VALUES ($1, $2, $3, $4, $5)""", uuid.UUID(service_id), location_id, first, last,
        reason)


async def test_no_slot_is_offered_on_a_closure_of_the_clinic_or_of_its_location(db, clinic):
    _, service_id = clinic
    tuesday, wednesday = TODAY + timedelta(days=1), TODAY + timedelta(days=2)
    before = await fortnight(db, service_id, "Follow-up visit")
    assert {s.starts_at.date() for s in before} >= {tuesday, wednesday}
    assert {s.location_name for s in before if s.starts_at.date() == wednesday} == {
        "Downtown", "Northside"}
    await add_closure(db, service_id, tuesday, tuesday, "staff training")
    await add_closure(db, service_id, wednesday, wednesday, "repairs", location="Northside")

    slots = await fortnight(db, service_id, "Follow-up visit")
    assert tuesday not in {s.starts_at.date() for s in slots}
    on_wednesday = {s.location_name for s in slots if s.starts_at.date() == wednesday}
    assert on_wednesday == {"Downtown"}  # Northside is shut, Downtown is not
    assert [c.reason for c in await sched.closures(db.pool, service_id, TODAY)] == [
        "staff training", "repairs"]
    assert await sched.closures(db.pool, service_id, TODAY + timedelta(days=3)) == []
