"""Every call back the agent promises has its task, and the caller is told when it will
come; a call back that could not be arranged is never promised.

The demo clinic is in Chicago: Downtown opens 8 to 4 on Fridays, Northside 9 to 5 on
Saturdays. A caller at 6 PM on a Friday is called back Saturday from 9 AM.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from db import outbound
from tests.flows.callers import PRIYA_PHONE, call_from

CHICAGO = ZoneInfo("America/Chicago")
UNKNOWN_PHONE = "+15550100299"


def next_friday() -> date:
    soon = date.today() + timedelta(days=2)
    return soon + timedelta(days=(4 - soon.weekday()) % 7)


FRIDAY = next_friday()
FRIDAY_EVENING = datetime.combine(FRIDAY, time(18), CHICAGO).astimezone(UTC)
SATURDAY_9 = datetime.combine(FRIDAY + timedelta(days=1), time(9), CHICAGO)


async def at_friday_evening(db, clinic, phone: str | None = PRIYA_PHONE):
    return await call_from(db, clinic, phone, now=lambda: FRIDAY_EVENING,
                           today=lambda: FRIDAY)


async def tasks_of(db, call_id: str) -> list[asyncpg.Record]:
    return await db.pool.fetch(
        "SELECT t.*, r.id AS request FROM outbound_tasks t "
        "LEFT JOIN callback_requests r ON r.id = t.callback_request_id "
        "WHERE t.source_call = $1", uuid.UUID(call_id))


async def requests_of(db, call_id: str) -> list[asyncpg.Record]:
    return await db.pool.fetch("SELECT * FROM callback_requests WHERE call_id = $1",
                               uuid.UUID(call_id))


async def ask_for_a_call_back(caller, *, number: str | None = None) -> str:
    """The caller asks to be called back (on `number` when given); all they heard."""
    await caller.says("could somebody ring me back please")
    await caller.says("it's about the bill I got in the post")
    if number is None:
        await caller.says("yes, this number is fine")
    else:
        await caller.says(number)
        await caller.says("yes")
    return " ".join(caller.heard)


async def test_a_call_back_request_is_a_task_and_the_caller_hears_when(db, clinic):
    caller = await at_friday_evening(db, clinic)

    said = await ask_for_a_call_back(caller)

    session = caller.engine.session
    (task,) = await tasks_of(db, session.call_id)
    assert (task["kind"], task["priority"], task["status"]) == ("callback", 5, "pending")
    assert str(task["patient_id"]) == session.patient.id and task["phone"] is None
    assert str(task["service_id"]) == session.service_id and task["request"] is not None
    assert task["timezone"] == "America/Chicago" and task["not_before"] == SATURDAY_9
    assert "will call you back tomorrow morning from 9 AM" in said
    assert await outbound.get_task(db.pool, session.workspace_id, str(task["id"]))


async def test_a_number_given_for_the_call_back_is_the_one_the_task_dials(db, clinic):
    caller = await at_friday_evening(db, clinic)
    await ask_for_a_call_back(
        caller, number="not this one, try my mobile, three one two five five five zero one "
                       "nine nine")
    (task,) = await tasks_of(db, caller.engine.session.call_id)
    assert task["phone"] == "+13125550199" and task["patient_id"] is not None


async def test_a_caller_never_identified_is_called_back_on_the_number_they_called_from(
        db, clinic):
    caller = await at_friday_evening(db, clinic, UNKNOWN_PHONE)

    said = await ask_for_a_call_back(caller)

    (task,) = await tasks_of(db, caller.engine.session.call_id)
    assert (task["patient_id"], task["phone"]) == (None, UNKNOWN_PHONE)
    assert "tomorrow morning from 9 AM" in said


async def test_a_red_flag_is_called_back_first(db, clinic):
    caller = await at_friday_evening(db, clinic)

    said = await caller.says("I have crushing chest pain and I can't breathe")

    assert "call 911" in said and "call you tomorrow morning from 9 AM" in said
    (task,) = await tasks_of(db, caller.engine.session.call_id)
    assert (task["kind"], task["priority"]) == ("callback", 10)


async def test_an_urgent_request_without_a_red_flag_comes_next(db, clinic):
    caller = await at_friday_evening(db, clinic)
    result = await caller.engine.tools.call(
        "handoff_prep", "EscalateToHuman",
        {"reason": "medication question", "message": "ran out of pills", "urgent": True})
    assert result.ok and "tomorrow morning from 9 AM" in result.text
    (task,) = await tasks_of(db, caller.engine.session.call_id)
    assert task["priority"] == 9


async def test_a_call_back_that_could_not_be_written_is_never_promised(
        db, clinic, task_writes_fail):
    caller = await at_friday_evening(db, clinic)

    said = await ask_for_a_call_back(caller)

    call_id = caller.engine.session.call_id
    assert await tasks_of(db, call_id) == [] and await requests_of(db, call_id) == []
    assert "will call you" not in said and "don't wait for our call" in said
    assert "5 5 5, 0 1 0, 0 1 1 0" in said  # Downtown's number, to ring instead
    assert caller.writer.events("call_not_arranged")
    (tool,) = caller.tool_calls("EscalateToHuman")
    assert tool.error_class == "pms" and "do not say the clinic will call" in tool.output


async def test_an_emergency_whose_call_back_failed_still_gets_the_emergency_guidance(
        db, clinic, task_writes_fail):
    caller = await at_friday_evening(db, clinic)

    said = await caller.says("I have crushing chest pain and I can't breathe")

    assert said.startswith("That sounds like it could be an emergency") and "call 911" in said
    assert "call you" not in said and "don't wait for a call from us" in said


async def test_a_caller_who_asked_not_to_be_called_is_not_promised_a_call(db, clinic):
    caller = await at_friday_evening(db, clinic)
    session = caller.engine.session
    await outbound.set_do_not_call(db.pool, session.workspace_id,
                                   patient_id=session.patient.id, phone=None, call_id=None)

    said = await ask_for_a_call_back(caller)

    assert await tasks_of(db, session.call_id) == []
    assert len(await requests_of(db, session.call_id)) == 1  # the team still sees it
    assert "will call you" not in said and "wasn't able to arrange a call back" in said
