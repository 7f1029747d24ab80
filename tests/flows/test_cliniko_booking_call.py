"""A call booking through Cliniko: the time the caller picked was taken at Cliniko's front
desk meanwhile, so they hear it was just taken and book the next one; Cliniko failing as
they say yes still books them (the slot is held here) and the queued push writes it
there afterwards, once.

No LLM: the deterministic navigator and the real tools over the embedded database, with
Cliniko a local fake holding the demo clinic's people, places and open times.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import pytest

from db import scheduling
from db.slots import Slot
from language.spoken import say_time
from runner.practice_push import Pusher, push_booking
from services.cliniko.practice import ClinikoPractice
from tests.fake_cliniko import FakeCliniko, serve_cliniko
from tests.fakes import CollectingWriter
from tests.flows.callers import PRIYA_PHONE, Caller, call_from
from tests.flows.test_engine import live_bookings, patient
from tests.flows.test_slot_taken import SYSTEM_DOWN, TAKEN, picked

pytestmark = pytest.mark.timeout(60)

KEY = "MS0xRmxvd3NDbGluaWtv-au1"
AGENT = "clinic-voice-agent tests (ops@example.invalid)"
PHYSIO = "Physiotherapy session"
APPOINTMENTS = "/v1/individual_appointments"


class Twin:
    """The fake Cliniko holding the clinic's physiotherapy schedule, by Cliniko's ids."""

    def __init__(self, fake: FakeCliniko) -> None:
        self.fake = fake
        self.businesses: dict[str, str] = {}
        self.people: dict[str, str] = {}
        self.physio = ""

    def take(self, slot: Slot) -> None:
        """The front desk books the slot in Cliniko for a walk-in."""
        walk_in = self.fake.add_patient("Walk", "In", date(1970, 1, 1))
        self.fake.add_appointment(walk_in, self.people[slot.practitioner_name], self.physio,
                                  self.businesses[slot.location_name], slot.starts_at)

    def at(self, slot: Slot) -> list[dict]:
        """The live Cliniko appointments at the slot's time with its practitioner."""
        at = slot.starts_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return [a for a in self.fake.appointments.values()
                if a["practitioner_id"] == self.people[slot.practitioner_name]
                and a["starts_at"] == at and not a["cancelled_at"]]


async def twin_of(db, clinic) -> Twin:
    """Cliniko as the clinic keeps it: the physiotherapists at their locations, with the
    world model's open physiotherapy times for the next three weeks."""
    _, service_id = clinic
    kind = next(t for t in await scheduling.appointment_types(db.pool, service_id)
                if t.name == PHYSIO)
    today = date.today()
    slots = await scheduling.available_slots(
        db.pool, service_id, appointment_type=kind, first_day=today,
        last_day=today + timedelta(days=20), now=datetime.now(UTC))
    twin = Twin(FakeCliniko(api_key=KEY, account_timezone=slots[0].starts_at.tzinfo.key))
    for slot in slots:
        if slot.location_name not in twin.businesses:
            twin.businesses[slot.location_name] = twin.fake.add_business(slot.location_name)
        business = twin.businesses[slot.location_name]
        if slot.practitioner_name not in twin.people:
            first, last = slot.practitioner_name.removeprefix("Dr. ").split(" ", 1)
            twin.people[slot.practitioner_name] = twin.fake.add_practitioner(first, last)
        twin.fake.works_at[business].add(twin.people[slot.practitioner_name])
    twin.physio = twin.fake.add_appointment_type(PHYSIO, kind.duration_min,
                                                 practitioners=twin.people.values())
    for slot in slots:
        twin.fake.open_times(twin.businesses[slot.location_name],
                             twin.people[slot.practitioner_name], twin.physio, [slot.starts_at])
    return twin


@pytest.fixture
async def cliniko(db, clinic) -> AsyncIterator[tuple[Twin, ClinikoPractice]]:
    twin = await twin_of(db, clinic)
    async with serve_cliniko(twin.fake) as base_url:
        practice = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT, base_url=base_url)
        try:
            yield twin, practice
        finally:
            await practice.aclose()


async def picks_the_first_physio_time(db, clinic, practice) -> Caller:
    caller = await call_from(db, clinic, PRIYA_PHONE)
    caller.engine.tools.practice = practice
    await caller.says("Hi, I'd like to book a physio appointment")
    await caller.says("next week in the morning please")
    assert (await caller.says("the first one")).startswith("Just to confirm:")
    return caller


async def test_a_time_taken_in_cliniko_meanwhile_is_said_so_and_the_next_one_is_booked_there(
    db, clinic, cliniko
):
    twin, practice = cliniko
    caller = await picks_the_first_physio_time(db, clinic, practice)
    wanted = picked(caller)
    twin.take(wanted)  # the front desk was quicker

    lost = await caller.says("yes please")

    assert TAKEN.search(lost) and not SYSTEM_DOWN.search(lost)
    instead = picked(caller)
    assert instead.key != wanted.key and say_time(instead.starts_at) in lost
    (event,) = caller.writer.events("slot_taken")
    assert event.data["found_by"] == "cliniko" and event.data["next_offered"] is True
    priya = (await patient(db, clinic, PRIYA_PHONE)).id
    assert wanted.starts_at not in [a.starts_at for a in await live_bookings(db, priya)]

    booked = await caller.says("yes, that's fine")

    assert booked.startswith("You're booked")
    assert instead.starts_at in [a.starts_at for a in await live_bookings(db, priya)]
    assert len(twin.at(instead)) == 1 and len(twin.at(wanted)) == 1  # theirs, and ours


async def test_cliniko_failing_at_the_yes_still_books_the_caller_and_the_job_writes_it_once(
    db, clinic, cliniko
):
    twin, practice = cliniko
    caller = await picks_the_first_physio_time(db, clinic, practice)
    wanted = picked(caller)
    twin.fake.fail_next(503, only=f"POST {APPOINTMENTS}")

    heard = await caller.says("yes please")

    # True: the slot is held for them here, and nothing is claimed about Cliniko.
    assert heard.startswith("You're booked") and "cliniko" not in heard.lower()
    (booking,) = caller.tool_calls("CreateAppointment")
    assert booking.error_class is None
    (deferred,) = caller.writer.events("practice_write_deferred")
    assert deferred.data["practice"] == "cliniko" and "503" in deferred.data["reason"]
    priya = (await patient(db, clinic, PRIYA_PHONE)).id
    [held] = [a for a in await live_bookings(db, priya) if a.starts_at == wanted.starts_at]
    assert twin.at(wanted) == []

    pusher = Pusher(db.pool, practice, CollectingWriter())
    await push_booking(pusher, {"appointment_id": held.id})
    await push_booking(pusher, {"appointment_id": held.id})  # run again: nothing more

    [there] = twin.at(wanted)
    assert f"voice-agent-{held.id}" in there["notes"]
    assert len(twin.fake.received("POST", APPOINTMENTS)) == 2  # the failed one, then the job's
    assert await db.pool.fetchval("SELECT practice_status FROM appointments WHERE id = $1",
                                  uuid.UUID(held.id)) == "pushed"
