"""A caller who asks for a person is put through while the clinic is open: to the
location they name, else the one they called, from the clinic's own numbers; while it is
closed, or when the call cannot be handed over, they are offered a call back instead.

No LLM: calls on the deterministic navigator over the embedded database, the clinic's
clock set to a weekday morning or to the night.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from db import scheduling as sched
from flows.graph_navigator_processor import yes_or_no_without_a_number
from runner.handoff import RESUME_AT
from tests.flows.callers import PRIYA_PHONE, call_from

ZONE = ZoneInfo("America/Chicago")  # the demo clinic's


def next_weekday_at(hour: int) -> datetime:
    day = datetime.now(ZONE).date() + timedelta(days=1)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return datetime(day.year, day.month, day.day, hour, tzinfo=ZONE)


async def caller(db, clinic, at: datetime, *, can_put_through: bool = True):
    return await call_from(db, clinic, PRIYA_PHONE, now=lambda: at.astimezone(UTC),
                           today=lambda: at.date(), can_put_through=can_put_through,
                           dialled_number="+15550100100")


@pytest.mark.parametrize("ask", [
    "Can I speak to a real person please?",
    "I'd like to talk to someone at the front desk",
    "put me through to a human",
])
async def test_asking_for_a_person_while_open_puts_the_caller_through(db, clinic, ask):
    call = await caller(db, clinic, next_weekday_at(10))

    heard = await call.says(ask)

    locations = await sched.locations(db.pool, clinic[1])
    assert "putting you through to our" in heard and "won't have to repeat" in heard
    assert call.last.transfer_to in {loc.phone_number for loc in locations}
    assert call.last.end_call
    assert [e.type for e in call.writer.events("put_through")] == ["put_through"]
    assert heard.rstrip().endswith("Please hold for a moment."), heard


async def test_the_location_the_caller_names_is_the_one_rung(db, clinic):
    call = await caller(db, clinic, next_weekday_at(10))
    locations = await sched.locations(db.pool, clinic[1])
    wanted = locations[-1]

    heard = await call.says(f"Can I talk to someone at the {wanted.name} clinic please?")

    assert f"our {wanted.name} clinic" in heard
    assert call.last.transfer_to == wanted.phone_number


async def test_at_night_asking_for_a_person_is_offered_a_call_back(db, clinic):
    call = await caller(db, clinic, next_weekday_at(23))

    heard = await call.says("Can I speak to a real person please?")

    assert "pass on to the team" in heard and call.last.transfer_to is None


async def test_a_call_that_cannot_be_handed_over_is_offered_a_call_back(db, clinic):
    call = await caller(db, clinic, next_weekday_at(10), can_put_through=False)

    heard = await call.says("Can I speak to a real person please?")

    assert "pass on to the team" in heard and call.last.transfer_to is None


async def test_a_caller_nobody_could_take_goes_on_to_a_call_back_with_the_agent(db, clinic):
    call = await call_from(db, clinic, PRIYA_PHONE, resume=RESUME_AT)

    asked = await call.says("Could the doctor call me about my blood test results please?")
    done = await call.says("Yes, this number is fine.")

    assert "number" in asked.lower()
    assert "call you back" in done
    (escalated,) = call.tool_calls("EscalateToHuman")
    assert "blood test" in escalated.input["message"]


@pytest.mark.parametrize(("said", "skip"), [
    ("Yes, this number is fine.", True),
    ("yeah that's the best one", True),
    ("No, not that one.", True),
    ("Yes, it's three one two five five five zero one nine nine", False),
    ("no, use 312 555 0199", False),
    ("three one two five five five zero one nine nine", False),
])
def test_a_yes_or_no_to_the_number_on_record_is_not_heard_again_as_a_number(said, skip):
    assert yes_or_no_without_a_number(said) is skip
