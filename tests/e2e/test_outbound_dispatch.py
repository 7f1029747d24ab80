"""The real service's dispatcher against the simulator's Twilio stand-in: each due task
is dialled once from the clinic's number; a voicemail hears only the clinic's name and its
number, a busy line is tried again later; both outcomes are on the attempt, and the
machine's call is on record. Each test has a database of its own, so no other service's
job worker takes its dial jobs."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

import pytest
import yaml

from db import outbound
from db import repositories as repo
from language.spoken import say_phone
from simulator.outbound_callee import CallTiming, script_callee
from simulator.twilio_rest import FakeTwilioRest
from tests.api.clinics import new_number
from tests.e2e.follow_through import database_of_its_own, service_and_twilio
from tests.e2e.outbound_tasks import due_task

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def _ended(db, task_ids: list[str], timeout_s: float) -> list[outbound.Attempt]:
    """Each task's first attempt, once every one has ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [await outbound.attempts(db.pool, task_id) for task_id in task_ids]
        if all(attempts and attempts[0].status == "ended" for attempts in found):
            return [attempts[0] for attempts in found]
        if time.monotonic() > deadline:
            raise AssertionError(f"attempts not ended in {timeout_s} s: {found}")
        await asyncio.sleep(0.2)


async def _closed_call(db, call_id: str, timeout_s: float = 15) -> dict:
    """The call's record once the service has closed it (the attempt can end, on Twilio's
    callback, while the service is still closing the call)."""
    deadline = time.monotonic() + timeout_s
    while (record := await repo.get_call(db.pool, call_id))["ended_at"] is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"call not closed in {timeout_s} s")
        await asyncio.sleep(0.2)
    return record


async def test_the_dispatcher_dials_each_due_task_once_and_follows_it_to_its_outcome(
        pg_dsn, tmp_path):
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db:
        await _dials_each_due_task_once(db, tmp_path)


async def _dials_each_due_task_once(db, tmp_path) -> None:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    clinic_number, machine, busy = new_number(), new_number(), new_number()
    clinic = await repo.create_service(db.pool, workspace["id"], "Harbour Clinic",
                                       phone_number=clinic_number)
    twilio = FakeTwilioRest(timing=CallTiming(ring_s=0.2))
    twilio.add_number(clinic_number)
    twilio.add_callee(machine, "voicemail")
    twilio.add_callee(busy, "busy")

    async with service_and_twilio(db, twilio, tmp_path):
        tasks = [await due_task(db, workspace["id"], clinic["id"], number)
                 for number in (machine, busy)]
        left, rang = await _ended(db, tasks, 60)
        for attempt in (left, rang):
            await twilio.wait_for(attempt.call_sid)
        after = [await outbound.get_task(db.pool, None, task_id) for task_id in tasks]

    placed = twilio.placed()
    assert sorted(r.form["To"] for r in placed) == sorted([machine, busy])  # once each
    assert {r.form["From"] for r in placed} == {clinic_number}
    assert {r.form["MachineDetection"] for r in placed} == {"DetectMessageEnd"}
    heard = twilio.outcome(left.call_sid)
    assert heard.answered_by == "machine_end_beep" and heard.ended_by == "agent"
    (message,) = heard.said
    assert "Harbour Clinic" in message and say_phone(clinic_number) in message
    assert "call us back" in message and "question" not in message
    assert (left.outcome, rang.outcome) == ("voicemail", "busy")
    record = await repo.get_call(db.pool, left.call_id)
    assert (record["direction"], record["completion_reason"]) == ("outbound", "voicemail_left")
    for task in after:  # neither reached: both tried again later
        assert task.status == "pending" and task.next_attempt_at > datetime.now(UTC)
    status_codes = {sent.status_code for sent in twilio.webhooks}
    assert status_codes <= {200, 204}, twilio.webhooks  # every webhook signed and accepted


async def test_a_person_who_cannot_talk_leaves_the_task_closed_with_what_the_call_found(
        pg_dsn, tmp_path):
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db:
        await _cannot_talk(db, tmp_path)


async def _cannot_talk(db, tmp_path) -> None:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    clinic_number, person = new_number(), new_number()
    clinic = await repo.create_service(db.pool, workspace["id"], "Harbour Clinic",
                                       phone_number=clinic_number)
    script = tmp_path / "callee.yaml"
    script.write_text(yaml.safe_dump({
        "name": "hangs_up", "from": person, "to": clinic_number, "hangup_after_s": 1.0,
        "turns": [{"say": "Hello? Sorry, I can't talk now.", "wait_s": 4}]}))
    twilio = FakeTwilioRest(timing=CallTiming(ring_s=0.2))
    twilio.add_number(clinic_number)
    twilio.add_callee(person, script_callee(script))

    async with service_and_twilio(db, twilio, tmp_path):
        task_id = await due_task(db, workspace["id"], clinic["id"], person)
        (attempt,) = await _ended(db, [task_id], 90)
        await twilio.wait_for(attempt.call_sid)
        record = await _closed_call(db, attempt.call_id)
        task = await outbound.get_task(db.pool, None, task_id)

    heard = twilio.outcome(attempt.call_sid)
    assert heard.answered_by == "human" and heard.stream_url is not None, heard
    assert attempt.outcome == "answered"
    assert record["direction"] == "outbound" and record["ended_at"] is not None
    # The conversation closed the task with what it found (the person could not talk),
    # not the dispatcher's plain "answered".
    # (Heard, or not, by the offline recogniser: either way nobody was confirmed.)
    assert task.status == "failed" and task.outcome in ("wrong_person", "failed"), task
    events = await db.pool.fetch("SELECT type FROM call_events WHERE call_id = $1",
                                 uuid.UUID(attempt.call_id))
    assert "outbound_task_finished" in {e["type"] for e in events}
