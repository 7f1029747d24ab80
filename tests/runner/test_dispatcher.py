"""The dispatcher on a fake clock: it dials a due task once, only in the calling window
(the callee's 8 am to 9 pm, the clinic's opening hours, the task's own hours), at most
so many times a day per number, only with a line to spare for callers, never someone
who asked not to be called; it tries again with a growing backoff and then gives up,
saying why; and a dial interrupted by a crash is never placed twice."""

from __future__ import annotations

import uuid
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import pytest
from loguru import logger
from pgqueuer import RetryRequested

from db import jobs, outbound
from lib.shared_slots import SharedSlots
from runner.outbound.pace import DialPace
from runner.outbound.twilio_calls import TwilioCallError
from runner.runtime import AppRuntime, line_slots
from tests.api.clinics import new_number
from tests.runner.outbound_world import (
    NEW_YORK,
    PUBLIC_URL,
    WEEKDAYS_8_TO_6,
    ProcessKilled,
    World,
    at,
    make_world,
)

TUESDAY_10AM = at("2030-01-08 10:00")


async def run_until_it_waits(world: World, task_id: str) -> timedelta:
    """Run the task's job once; how long it asked to wait before its next run."""
    with pytest.raises(RetryRequested) as waited:
        await world.dispatcher.run(task_id)
    return waited.value.delay


@pytest.fixture
async def world(db) -> World:
    return await make_world(db, now=TUESDAY_10AM)


async def test_a_due_task_is_dialled_once_from_the_clinics_number(world):
    task_id = await world.task()

    follow_up = await run_until_it_waits(world, task_id)

    (create,) = world.twilio.creates
    assert (create["to"], create["from_"]) == (world.patient_phone, world.clinic_number)
    assert create["machine_detection"] is True
    (attempt,) = await world.attempts(task_id)
    assert urlparse(create["url"]).path == "/voice/outbound/answer"
    assert create["url"].startswith(PUBLIC_URL)
    assert parse_qs(urlparse(create["url"]).query) == {"attempt": [attempt.id]}
    assert parse_qs(urlparse(create["status_callback"]).query) == {"attempt": [attempt.id]}
    assert (attempt.number, attempt.status, attempt.call_sid) == (
        1, "ringing", world.twilio.placed[0].sid)
    task = await world.get(task_id)
    assert (task.status, task.attempts_made) == ("in_progress", 1)
    assert follow_up == timedelta(seconds=world.settings.outbound.follow_up_s)
    assert attempt.id in world.lines.ringing  # the ringing call holds a line


@pytest.mark.parametrize(("why", "now", "patient_timezone", "opening_hours", "expected"), [
    # 10 am in New York is 7 am in Los Angeles: not before 8 am where the callee is.
    ("before 8 am the callee's time", at("2030-01-08 10:00"), "America/Los_Angeles", None,
     at("2030-01-08 08:00", "America/Los_Angeles")),
    ("after 9 pm the callee's time", at("2030-01-08 21:30"), NEW_YORK, None,
     at("2030-01-09 08:00")),
    ("the clinic not open yet", at("2030-01-08 07:30"), NEW_YORK, WEEKDAYS_8_TO_6,
     at("2030-01-08 08:00")),
    ("a Saturday", at("2030-01-12 11:00"), NEW_YORK, WEEKDAYS_8_TO_6,
     at("2030-01-14 08:00")),
    ("the patient has no timezone: the task's", at("2030-01-08 06:00"), None, None,
     at("2030-01-08 08:00")),
])
async def test_a_task_outside_its_calling_window_waits_for_the_window(
        db, why, now, patient_timezone, opening_hours, expected):
    world = await make_world(db, now=now, patient_timezone=patient_timezone,
                             opening_hours=opening_hours)
    task_id = await world.task()

    waited = await run_until_it_waits(world, task_id)

    assert world.twilio.creates == [], why
    assert waited == expected - now, why
    assert (await world.get(task_id)).next_attempt_at == expected
    # At that moment it is dialled.
    world.clock.now = expected
    await run_until_it_waits(world, task_id)
    assert len(world.twilio.placed) == 1


async def test_the_tasks_own_hours_are_kept_too(world):
    from datetime import time

    task_id = await world.task(window_start=time(14), window_end=time(16))

    waited = await run_until_it_waits(world, task_id)

    assert world.twilio.creates == [] and waited == timedelta(hours=4)


async def test_a_number_tried_the_daily_limit_waits_until_the_oldest_try_is_a_day_old(world):
    earlier = await world.task(kind="scheduled")  # another task calling the same number
    for number, hours_ago in enumerate((20, 10, 1), start=1):
        await world.db.pool.execute(
            "INSERT INTO outbound_attempts (task_id, number, to_number, status, outcome, "
            "started_at) VALUES ($1, $2, $3, 'ended', 'no_answer', $4)",
            uuid.UUID(earlier), number, world.patient_phone,
            world.clock.now - timedelta(hours=hours_ago))
    task_id = await world.task()

    waited = await run_until_it_waits(world, task_id)

    assert world.twilio.creates == []
    assert waited == timedelta(hours=4)  # the try 20 hours ago is a day old then
    assert (await world.get(task_id)).next_attempt_at == world.clock.now + timedelta(hours=4)


async def test_unanswered_calls_are_tried_again_later_each_time_then_the_task_fails(world):
    task_id = await world.task(max_attempts=3, retry_backoff_minutes=60)
    waits = []
    for status in ("no-answer", "busy", "no-answer"):
        await run_until_it_waits(world, task_id)
        attempt = (await world.attempts(task_id))[-1]
        world.twilio.set_status(attempt.call_sid, status)
        await world.dispatcher.call_ended(attempt, status, answered_by=None)
        task = await world.get(task_id)
        if task.status == "pending":
            waits.append(task.next_attempt_at - world.clock.now)
            job = await jobs.job_for(world.db.pool, outbound.dial_key(task_id))
            assert job is not None and job.status == "queued"
            world.clock.now = task.next_attempt_at

    assert waits == [timedelta(minutes=60), timedelta(minutes=120)]  # doubling
    assert len(world.twilio.placed) == 3
    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("failed", "no_answer")
    assert "last of 3 attempts" in task.last_error
    assert [a.outcome for a in await world.attempts(task_id)] == [
        "no_answer", "busy", "no_answer"]
    assert world.lines.ringing == set()  # every line given back
    # Nothing more to do for the job.
    await world.dispatcher.run(task_id)
    assert len(world.twilio.placed) == 3


async def test_a_retry_that_would_fall_outside_the_window_waits_for_the_next_one(db):
    world = await make_world(db, now=at("2030-01-08 17:00"), opening_hours=WEEKDAYS_8_TO_6)
    task_id = await world.task(retry_backoff_minutes=120)
    await run_until_it_waits(world, task_id)
    (attempt,) = await world.attempts(task_id)

    await world.dispatcher.call_ended(attempt, "no-answer", answered_by=None)

    task = await world.get(task_id)
    assert task.status == "pending"
    assert task.next_attempt_at == at("2030-01-09 08:00")  # 7 pm is after closing
    assert "next try" in task.last_error


async def test_a_callee_who_asked_not_to_be_called_is_not_dialled(world):
    task_id = await world.task()
    await world.db.pool.execute("UPDATE patients SET do_not_call = true WHERE id = $1",
                                uuid.UUID(world.patient_id))

    await world.dispatcher.run(task_id)

    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("cancelled", "opted_out")
    assert world.twilio.creates == []


async def test_a_number_that_asked_not_to_be_called_is_not_dialled(world):
    task_id = await world.task(patient_id=None, phone="+15550009999")
    async with world.db.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO do_not_call_numbers (workspace_id, phone) VALUES ($1, $2)",
            uuid.UUID(world.workspace_id), "+15550009999")

    await world.dispatcher.run(task_id)

    assert (await world.get(task_id)).outcome == "opted_out"
    assert world.twilio.creates == []


async def test_with_no_line_to_spare_the_task_waits_and_is_dialled_once_one_frees(world):
    task_id = await world.task()
    world.lines.room = False

    waited = await run_until_it_waits(world, task_id)

    assert world.twilio.creates == []
    assert waited == timedelta(seconds=world.settings.outbound.capacity_recheck_s)
    world.lines.room = True
    world.clock.advance(seconds=waited.total_seconds())
    await run_until_it_waits(world, task_id)
    assert len(world.twilio.placed) == 1


def _runtime(capacity: int, reserve: int, active: int) -> AppRuntime:
    """The capacity bookkeeping of a runtime (nothing else of it)."""
    from runner.drain import CallDrain

    runtime = AppRuntime.__new__(AppRuntime)
    runtime.settings = SimpleNamespace(outbound=SimpleNamespace(
        inbound_reserve=reserve, ring_hold_s=100.0))
    runtime.drain, runtime.call_capacity = CallDrain(), capacity
    runtime.active_calls = {f"call-{n}": None for n in range(active)}
    runtime._profiles, runtime.lines = {}, SharedSlots.local(line_slots(capacity))
    return runtime


def test_outbound_calls_stop_short_of_capacity_so_callers_are_still_answered():
    runtime = _runtime(capacity=4, reserve=2, active=2)

    assert not runtime.outbound_has_room()  # the dispatcher waits...
    assert runtime.has_capacity()  # ...and the next caller is answered

    runtime.hold_ringing("attempt-1")  # a dialled call ringing holds a line
    runtime.hold_ringing("attempt-2")
    assert runtime.calls_in_hand() == 4 and not runtime.has_capacity()
    runtime.release_ringing("attempt-1")
    assert runtime.has_capacity()


def test_an_idle_process_with_fewer_lines_than_the_reserve_still_places_one_call():
    runtime = _runtime(capacity=2, reserve=2, active=0)
    assert runtime.outbound_has_room()
    runtime.hold_ringing("attempt-1")
    assert not runtime.outbound_has_room()


async def test_a_dial_cut_off_after_twilio_placed_it_is_adopted_never_dialled_again(world):
    task_id = await world.task()
    world.twilio.killed_after_placing = True
    with pytest.raises(ProcessKilled):
        await world.dispatcher.run(task_id)
    (attempt,) = await world.attempts(task_id)
    assert (attempt.status, attempt.call_sid) == ("dialing", None)

    # The job runs again (its worker died holding it).
    world.clock.advance(seconds=30)
    await run_until_it_waits(world, task_id)

    assert len(world.twilio.creates) == 1  # never a second dial
    (adopted,) = await world.attempts(task_id)
    assert adopted.call_sid == world.twilio.placed[0].sid and adopted.status == "ringing"
    assert (await world.get(task_id)).status == "in_progress"


async def test_a_dial_cut_off_before_it_reached_twilio_is_placed_once_under_the_same_attempt(
        world):
    task_id = await world.task()
    world.twilio.killed_before_placing = True
    with pytest.raises(ProcessKilled):
        await world.dispatcher.run(task_id)
    assert world.twilio.placed == []

    world.clock.advance(seconds=30)
    await run_until_it_waits(world, task_id)
    await run_until_it_waits(world, task_id)  # and once more: following that call

    assert len(world.twilio.placed) == 1
    (attempt,) = await world.attempts(task_id)
    assert attempt.call_sid == world.twilio.placed[0].sid
    assert (await world.get(task_id)).attempts_made == 1


async def test_an_unplaced_dial_found_after_9_pm_waits_for_the_morning(db):
    world = await make_world(db, now=at("2030-01-08 20:59"))
    task_id = await world.task()
    world.twilio.killed_before_placing = True
    with pytest.raises(ProcessKilled):
        await world.dispatcher.run(task_id)

    world.clock.now = at("2030-01-08 21:10")  # the restart came late
    waited = await run_until_it_waits(world, task_id)

    assert world.twilio.placed == []
    assert world.clock.now + waited == at("2030-01-09 08:00")


async def test_a_dial_twilio_did_not_confirm_is_checked_before_any_new_dial(world):
    task_id = await world.task()
    world.twilio.refuse_with = TwilioCallError("Twilio did not answer in 12 s",
                                               retryable=True)

    await run_until_it_waits(world, task_id)

    (attempt,) = await world.attempts(task_id)
    assert attempt.status == "dialing"
    assert "did not confirm" in (await world.get(task_id)).last_error
    world.twilio.refuse_with = None
    await run_until_it_waits(world, task_id)
    assert len(world.twilio.placed) == 1 and len(await world.attempts(task_id)) == 1


async def test_twilio_refusing_for_now_costs_an_attempt_and_the_task_is_tried_later(world):
    task_id = await world.task()
    world.twilio.refuse_with = TwilioCallError("Twilio is unavailable (HTTP 503)",
                                               retryable=True, status=503)

    waited = await run_until_it_waits(world, task_id)

    (attempt,) = await world.attempts(task_id)
    assert (attempt.status, attempt.outcome) == ("ended", "failed")
    task = await world.get(task_id)
    assert task.status == "pending" and task.next_attempt_at == world.clock.now + timedelta(hours=1)
    assert waited == timedelta(hours=1)  # the job itself wakes for it
    assert world.lines.ringing == set()


async def test_a_number_twilio_says_is_invalid_fails_the_task_with_the_reason(world):
    task_id = await world.task()
    world.twilio.refuse_with = TwilioCallError(
        "Twilio refused to place a call: the To number is not a valid phone number "
        "(HTTP 400, code 21211)", retryable=False, code=21211, status=400)

    await world.dispatcher.run(task_id)

    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("failed", "failed")
    assert "not a valid phone number" in task.last_error


async def test_without_a_twilio_account_tasks_wait_and_say_so_and_the_log_says_it_once(world):
    world.dispatcher.calls = None
    world.dispatcher.unavailable = "outbound calling needs a Twilio account (TWILIO_ACCOUNT_SID)"
    first, second = await world.task(), await world.task()
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    try:
        waits = [await run_until_it_waits(world, first), await run_until_it_waits(world, second)]
    finally:
        logger.remove(sink)

    for task_id in (first, second):
        task = await world.get(task_id)
        assert task.status == "pending" and "needs a Twilio account" in task.last_error
    assert waits == [timedelta(seconds=world.settings.outbound.unavailable_recheck_s)] * 2
    assert len([line for line in lines if "needs a Twilio account" in line]) <= 1


async def test_a_task_with_no_calling_window_in_reach_fails_and_says_why(db):
    # Open only in the small hours, when nobody may be called.
    night_only = {day: ["01:00", "03:00"] for day in ("mon", "tue", "wed", "thu", "fri")}
    world = await make_world(db, now=TUESDAY_10AM, opening_hours=night_only)

    task_id = await world.task()
    await world.dispatcher.run(task_id)

    task = await world.get(task_id)
    assert task.status == "failed" and "no calling window" in task.last_error
    assert world.twilio.creates == []


async def test_a_closed_task_is_left_alone(world):
    task_id = await world.task()
    assert await outbound.cancel_task(world.db.pool, world.workspace_id, task_id)

    await world.dispatcher.run(task_id)

    assert world.twilio.creates == []


async def test_a_call_that_ended_while_nobody_heard_its_status_callback_is_concluded(world):
    task_id = await world.task()
    await run_until_it_waits(world, task_id)
    (attempt,) = await world.attempts(task_id)
    world.twilio.set_status(attempt.call_sid, "no-answer")

    world.clock.advance(seconds=120)
    waited = await run_until_it_waits(world, task_id)

    (ended,) = await world.attempts(task_id)
    assert (ended.status, ended.outcome) == ("ended", "no_answer")
    task = await world.get(task_id)
    assert task.status == "pending"
    assert world.clock.now + waited == task.next_attempt_at  # the job wakes for the next try


async def test_a_crashed_dial_whose_call_ended_meanwhile_is_concluded_and_tried_again(world):
    task_id = await world.task()
    world.twilio.killed_after_placing = True
    with pytest.raises(ProcessKilled):
        await world.dispatcher.run(task_id)
    world.twilio.set_status(world.twilio.placed[0].sid, "no-answer")  # callback went nowhere

    world.clock.advance(seconds=60)
    waited = await run_until_it_waits(world, task_id)

    (attempt,) = await world.attempts(task_id)
    assert (attempt.outcome, attempt.call_sid) == ("no_answer", world.twilio.placed[0].sid)
    task = await world.get(task_id)
    assert task.status == "pending" and len(world.twilio.creates) == 1
    # The job is the task's alarm clock: it wakes itself for the next try.
    assert world.clock.now + waited == task.next_attempt_at


async def test_a_burst_of_due_tasks_is_dialled_one_per_turn_each_once(world):
    world.dispatcher.pace = DialPace(per_second=1)
    tasks = [await world.task(patient_id=None, phone=new_number()) for _ in range(3)]

    waits = [await run_until_it_waits(world, task_id) for task_id in tasks]

    assert len(world.twilio.placed) == 1  # the first at once, the others at their turns
    assert waits[1:] == [timedelta(seconds=1), timedelta(seconds=2)]
    assert [(await world.get(t)).next_attempt_at for t in tasks[1:]] == [
        world.clock.now + timedelta(seconds=1), world.clock.now + timedelta(seconds=2)]
    for task_id, wait in zip(tasks[1:], waits[1:], strict=True):
        world.clock.now = TUESDAY_10AM + wait
        await run_until_it_waits(world, task_id)
    assert sorted(c.to for c in world.twilio.placed) == sorted(
        [(await world.get(t)).phone for t in tasks])
    assert [c.start_time - TUESDAY_10AM for c in world.twilio.placed] == [
        timedelta(0), timedelta(seconds=1), timedelta(seconds=2)]


async def test_a_waitlist_offer_whose_slot_has_gone_is_called_off_not_dialled(world):
    practitioner = str(uuid.uuid4())
    soon = {"practitioner_id": practitioner,
            "starts_at": (TUESDAY_10AM + timedelta(minutes=20)).isoformat(),
            "ends_at": (TUESDAY_10AM + timedelta(minutes=50)).isoformat()}
    later = {**soon, "starts_at": (TUESDAY_10AM + timedelta(days=1)).isoformat(),
             "ends_at": (TUESDAY_10AM + timedelta(days=1, minutes=30)).isoformat()}
    too_close = await world.task(kind="waitlist_offer", offer=soon)
    still_open = await world.task(kind="waitlist_offer", offer=later)

    await world.dispatcher.run(too_close)
    await run_until_it_waits(world, still_open)

    task = await world.get(too_close)
    assert (task.status, task.outcome) == ("cancelled", "slot_gone")
    assert [c["to"] for c in world.twilio.creates] == [world.patient_phone]  # the open one


async def test_an_offer_unanswered_while_its_slot_went_is_called_off_not_tried_again(world):
    starts = TUESDAY_10AM + timedelta(minutes=40)
    offer = {"practitioner_id": str(uuid.uuid4()), "starts_at": starts.isoformat(),
             "ends_at": (starts + timedelta(minutes=30)).isoformat()}
    task_id = await world.task(kind="waitlist_offer", offer=offer, max_attempts=2)
    await run_until_it_waits(world, task_id)  # dialled while the slot was open
    (attempt,) = await world.attempts(task_id)

    world.clock.advance(minutes=15)  # now too close to the slot to offer it
    world.twilio.set_status(attempt.call_sid, "no-answer")
    await world.dispatcher.run(task_id)

    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("cancelled", "slot_gone")
    assert len(world.twilio.creates) == 1 and task.next_attempt_at is None
