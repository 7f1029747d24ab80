"""The reminder sweep: one reminder call per appointment an enabled campaign covers,
however often it runs, due its lead time before the appointment."""

from __future__ import annotations

from datetime import datetime, time, timedelta

import pytest

from db import outbound, scheduling
from db.reminder_campaigns import put_campaign
from db.reminders import sweep_reminders
from tests.db.small_clinic import CHICAGO, SmallClinic, small_clinic

NOW = datetime(2027, 1, 4, 10, 0, tzinfo=CHICAGO)  # a Monday morning
SWEEP = timedelta(minutes=5)


@pytest.fixture
async def clinic(db, workspace_id) -> SmallClinic:
    return await small_clinic(db, workspace_id)


async def reminders_of(db, clinic: SmallClinic) -> dict[str, outbound.OutboundTask]:
    """The clinic's reminder tasks by appointment."""
    tasks = await outbound.list_tasks(db.pool, clinic.workspace_id, kind="reminder")
    return {t.appointment_id: t for t in tasks if t.service_id == clinic.service_id}


async def test_the_sweep_reminds_each_covered_appointment_once(db, clinic):
    await put_campaign(db.pool, clinic.workspace_id, clinic.service_id, enabled=True,
                       lead_hours=24, appointment_type_ids=[clinic.physio])
    tomorrow_early = NOW + timedelta(hours=20)  # Tuesday 6 AM
    covered = await clinic.book(await clinic.patient("Ada"), tomorrow_early)
    later = await clinic.book(await clinic.patient("Ben"), NOW + timedelta(hours=30))
    flu = await clinic.book(await clinic.patient("Cleo"), tomorrow_early + timedelta(hours=1),
                            kind=clinic.flu_shot, minutes=15)
    dan = await clinic.patient("Dan")
    gone = await clinic.book(dan, tomorrow_early + timedelta(hours=2))
    await scheduling.cancel(db.pool, gone, patient_id=dan, call_id=None)
    quiet = await clinic.book(await clinic.patient("Quinn", do_not_call=True),
                              tomorrow_early + timedelta(hours=3))

    await sweep_reminders(db.pool, NOW, interval=SWEEP)
    await sweep_reminders(db.pool, NOW + timedelta(minutes=1), interval=SWEEP)

    tasks = await reminders_of(db, clinic)
    assert set(tasks) == {covered}  # not later, not the flu shot, not cancelled or opted out
    (task,) = tasks.values()
    assert (task.kind, task.status, task.patient_id is not None) == ("reminder", "pending", True)
    assert task.not_before == NOW  # 24 hours before is already past: now, never before
    assert (task.window_start, task.window_end, len(task.window_days)) == (time(8), time(20), 7)
    assert {flu, gone, quiet}.isdisjoint(tasks) and later not in tasks


async def test_a_reminder_is_made_one_sweep_ahead_and_due_lead_hours_before(db, clinic):
    await put_campaign(db.pool, clinic.workspace_id, clinic.service_id, enabled=True,
                       lead_hours=24, appointment_type_ids=[])
    starts = NOW + timedelta(hours=30)  # Tuesday 4 PM
    booking = await clinic.book(await clinic.patient("Ben"), starts)

    await sweep_reminders(db.pool, starts - timedelta(hours=24, minutes=10), interval=SWEEP)
    assert await reminders_of(db, clinic) == {}
    await sweep_reminders(db.pool, starts - timedelta(hours=24, minutes=2), interval=SWEEP)

    task = (await reminders_of(db, clinic))[booking]
    assert task.not_before == starts - timedelta(hours=24)


async def test_a_disabled_campaign_reminds_no_one(db, clinic):
    await put_campaign(db.pool, clinic.workspace_id, clinic.service_id, enabled=False,
                       lead_hours=24, appointment_type_ids=[])
    await clinic.book(await clinic.patient("Ada"), NOW + timedelta(hours=3))
    await sweep_reminders(db.pool, NOW, interval=SWEEP)
    assert await reminders_of(db, clinic) == {}
