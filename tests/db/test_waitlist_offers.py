"""A slot freed by a cancellation is offered to the first patients on the waitlist for
its kind of appointment, by outbound call, first come first offered; once one books
it, the offers still waiting are called off."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from db import jobs, outbound, scheduling, waitlist
from db.waitlist_offers import offer_freed_slot, offer_still_open
from tests.db.small_clinic import CHICAGO, SmallClinic, small_clinic

NOW = datetime(2027, 1, 4, 10, 0, tzinfo=CHICAGO)  # a Monday morning
SLOT = datetime(2027, 1, 6, 10, 0, tzinfo=CHICAGO)  # Wednesday at 10
WEEKS_AGO = NOW - timedelta(weeks=3)


@pytest.fixture
async def clinic(db, workspace_id) -> SmallClinic:
    return await small_clinic(db, workspace_id)


async def offers(db, clinic: SmallClinic) -> list[outbound.OutboundTask]:
    tasks = await outbound.list_tasks(db.pool, clinic.workspace_id, kind="waitlist_offer")
    return sorted(tasks, key=lambda t: -t.priority)


async def cancelled_slot(clinic: SmallClinic, db, *, at: datetime = SLOT) -> tuple[str, str]:
    """Ben's appointment at `at`, cancelled by him: (Ben, the appointment)."""
    ben = await clinic.patient("Ben")
    booking = await clinic.book(ben, at)
    await scheduling.cancel(db.pool, booking, patient_id=ben, call_id=None)
    return ben, booking


async def test_cancelling_queues_the_offer_as_a_job_and_writes_no_offer_yet(db, clinic):
    ada = await clinic.patient("Ada")
    await clinic.waits(ada, clinic.physio, WEEKS_AGO)

    _ben, booking = await cancelled_slot(clinic, db)

    job = await jobs.job_for(db.pool, waitlist.offer_key(booking))
    assert (job.entrypoint, job.status, job.payload) == (
        "waitlist_offer", "queued", {"appointment_id": booking})
    assert await offers(db, clinic) == []


async def test_the_first_waitlisted_are_offered_the_slot_in_order(db, clinic):
    ben, booking = await cancelled_slot(clinic, db)
    await clinic.waits(ben, clinic.physio, WEEKS_AGO)  # the one who cancelled: first in line
    quiet = await clinic.patient("Quinn", do_not_call=True)
    await clinic.waits(quiet, clinic.physio, WEEKS_AGO + timedelta(hours=1))
    flu = await clinic.patient("Fay")
    await clinic.waits(flu, clinic.flu_shot, WEEKS_AGO + timedelta(hours=2))
    line = [await clinic.patient(name) for name in ("Ada", "Cleo", "Dan", "Eve")]
    for place, patient in enumerate(line):
        await clinic.waits(patient, clinic.physio, WEEKS_AGO + timedelta(days=place + 1))

    made = await offer_freed_slot(db.pool, booking, limit=3, now=NOW)

    tasks = await offers(db, clinic)
    assert len(made) == 3
    assert [t.patient_id for t in tasks] == line[:3]
    assert [t.priority for t in tasks] == [8, 7, 6]
    first = tasks[0]
    assert first.offer["practitioner_id"] == clinic.practitioner_id
    assert first.offer["appointment_type_id"] == clinic.physio
    assert datetime.fromisoformat(first.offer["starts_at"]) == SLOT
    assert first.waitlist_entry_id is not None and first.service_id == clinic.service_id
    assert first.not_before == NOW  # inside the clinic's hours: dialled now
    for task in tasks:
        assert await jobs.job_for(db.pool, outbound.dial_key(task.id)) is not None
    # the job run again (a worker died holding it) offers nothing twice
    assert await offer_freed_slot(db.pool, booking, limit=3, now=NOW) == []
    assert len(await offers(db, clinic)) == 3


async def test_a_slot_already_past_or_booked_again_is_offered_to_no_one(db, clinic):
    ada = await clinic.patient("Ada")
    await clinic.waits(ada, clinic.physio, WEEKS_AGO)
    _ben, gone = await cancelled_slot(clinic, db, at=NOW + timedelta(minutes=10))
    _cal, taken = await cancelled_slot(clinic, db, at=SLOT + timedelta(days=1))
    await clinic.book(await clinic.patient("Zoe"), SLOT + timedelta(days=1))

    assert await offer_freed_slot(db.pool, gone, limit=3, now=NOW) == []
    assert await offer_freed_slot(db.pool, taken, limit=3, now=NOW) == []
    assert await offers(db, clinic) == []


async def test_a_live_appointment_makes_no_offer(db, clinic):
    ada = await clinic.patient("Ada")
    await clinic.waits(ada, clinic.physio, WEEKS_AGO)
    booking = await clinic.book(await clinic.patient("Ben"), SLOT)
    assert await offer_freed_slot(db.pool, booking, limit=3, now=NOW) == []


async def test_once_one_books_the_others_still_waiting_are_called_off(db, clinic):
    _ben, booking = await cancelled_slot(clinic, db)
    ada, cleo, dan = [await clinic.patient(n) for n in ("Ada", "Cleo", "Dan")]
    for place, patient in enumerate((ada, cleo, dan)):
        await clinic.waits(patient, clinic.physio, WEEKS_AGO + timedelta(days=place))
    await offer_freed_slot(db.pool, booking, limit=3, now=NOW)
    by_patient = {t.patient_id: t for t in await offers(db, clinic)}
    await db.pool.execute("UPDATE outbound_tasks SET status = 'in_progress' WHERE id = $1",
                          uuid.UUID(by_patient[dan].id))  # being dialled right now

    cancelled = await waitlist.settle_offer(db.pool, by_patient[cleo].offer, patient_id=cleo)

    after = {t.patient_id: t for t in await offers(db, clinic)}
    assert cancelled == 1
    assert (after[ada].status, after[ada].outcome) == ("cancelled", "slot_gone")
    assert await jobs.job_for(db.pool, outbound.dial_key(after[ada].id)) is None
    assert after[cleo].status == "pending"  # the winner's own call finishes it
    assert after[dan].status == "in_progress"  # its call hears the slot is gone
    left = await db.pool.fetch("SELECT patient_id FROM waitlist_entries WHERE patient_id = "
                               "ANY($1::uuid[])", [uuid.UUID(p) for p in (ada, cleo, dan)])
    assert {str(r["patient_id"]) for r in left} == {ada, dan}
    assert await waitlist.settle_offer(db.pool, by_patient[cleo].offer, patient_id=cleo) == 0


async def test_a_cancellation_calls_off_its_reminder_call(db, clinic):
    ben = await clinic.patient("Ben")
    booking = await clinic.book(ben, SLOT)
    async with db.pool.acquire() as conn, conn.transaction():
        reminder = await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=clinic.workspace_id, service_id=clinic.service_id, kind="reminder",
            reason="reminder", goal="remind them", timezone="America/Chicago",
            not_before=NOW + timedelta(days=1), patient_id=ben, appointment_id=booking))

    await scheduling.cancel(db.pool, booking, patient_id=ben, call_id=None)

    task = await outbound.get_task(db.pool, clinic.workspace_id, reminder)
    assert task.status == "cancelled"
    assert await jobs.job_for(db.pool, outbound.dial_key(reminder)) is None


async def test_an_offer_is_open_until_someone_books_over_its_slot_or_it_is_too_close(db, clinic):
    ada = await clinic.patient("Ada")
    await clinic.waits(ada, clinic.physio, WEEKS_AGO)
    _ben, booking = await cancelled_slot(clinic, db)
    await offer_freed_slot(db.pool, booking, limit=3, now=NOW)
    (offer,) = [task.offer for task in await offers(db, clinic)]

    assert await offer_still_open(db.pool, offer, NOW)
    assert not await offer_still_open(db.pool, offer, SLOT - timedelta(minutes=10))
    # The front desk books someone else from 9:30 to 10:15, over the slot's start.
    await clinic.book(await clinic.patient("Walk-in"), SLOT - timedelta(minutes=30))
    assert not await offer_still_open(db.pool, offer, NOW)
    assert not await offer_still_open(db.pool, {"starts_at": "soon"}, NOW)  # unreadable
