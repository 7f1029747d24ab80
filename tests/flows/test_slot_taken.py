"""Two callers confirming the same time: one gets it, the other hears it was just taken
and is offered the next free time from the same search, which their next yes books.

No LLM: two calls on the deterministic navigator and the real tools over the embedded
database, their yeses said at the same moment.
"""

import asyncio
import re

import pytest

from db.slots import Slot
from flows.graph_tools import next_free
from language.spoken import say_time
from tests.flows.callers import DAVID_PHONE, PRIYA_PHONE, Caller, call_from
from tests.flows.test_engine import live_bookings, patient

TAKEN = re.compile(r"\b(someone else|another (caller|patient))\b.*\b(booked|taken|took)\b"
                   r"|\bjust (been )?(booked|taken|gone)\b", re.IGNORECASE)
SYSTEM_DOWN = re.compile(r"not responding|isn't responding|not answering", re.IGNORECASE)


def picked(caller: Caller) -> Slot:
    session = caller.engine.session
    return session.offered[session.picked_slot]


async def both_pick_the_first_physio_slot(db, clinic) -> tuple[Caller, Caller]:
    callers = [await call_from(db, clinic, PRIYA_PHONE), await call_from(db, clinic, DAVID_PHONE)]
    for caller in callers:
        await caller.says("Hi, I'd like to book a physio appointment")
        await caller.says("next week in the morning please")
        assert (await caller.says("the first one")).startswith("Just to confirm:")
    assert picked(callers[0]).key == picked(callers[1]).key
    return callers[0], callers[1]


async def test_the_caller_who_loses_the_race_hears_it_was_taken_and_books_the_next_time(
    db, clinic
):
    priya, david = await both_pick_the_first_physio_slot(db, clinic)
    contested = picked(priya)

    replies = await asyncio.gather(priya.says("yes please"), david.says("yes please"))

    winner, loser = (priya, david) if replies[0].startswith("You're booked") else (david, priya)
    lost = loser.heard[-1]
    assert winner.heard[-1].startswith("You're booked")
    # The loser is told the truth (taken, not a broken system) and offered the next time.
    assert TAKEN.search(lost) and not SYSTEM_DOWN.search(lost)
    offered = picked(loser)
    assert offered.key != contested.key and offered.starts_at >= contested.starts_at
    # ... from the same search: the same type, still in the morning they asked for.
    assert offered.appointment_type_id == contested.appointment_type_id
    assert offered.starts_at.hour < 12
    assert say_time(offered.starts_at) in lost and lost.rstrip().endswith("?")
    # The record says what happened: a conflict, not a system failure.
    (failed,) = loser.tool_calls("CreateAppointment")
    assert failed.error_class == "conflict"
    (event,) = [e for e in loser.writer.events("slot_taken")]
    assert event.data["next_offered"] is True and event.data["tool"] == "CreateAppointment"

    booked = await loser.says("yes, that's fine")

    assert booked.startswith("You're booked")
    loser_id = (await patient(db, clinic, PRIYA_PHONE if loser is priya else DAVID_PHONE)).id
    assert offered.starts_at in [a.starts_at for a in await live_bookings(db, loser_id)]
    winner_id = (await patient(db, clinic, PRIYA_PHONE if winner is priya else DAVID_PHONE)).id
    assert contested.starts_at in [a.starts_at for a in await live_bookings(db, winner_id)]


async def test_no_to_the_offered_time_books_nothing_and_reads_the_times_again(db, clinic):
    priya, david = await both_pick_the_first_physio_slot(db, clinic)
    await priya.says("yes")
    lost = await david.says("yes")
    assert TAKEN.search(lost)

    again = await david.says("no thanks")

    assert not again.startswith("You're booked")
    david_id = (await patient(db, clinic, DAVID_PHONE)).id
    assert [t.error_class for t in david.tool_calls("CreateAppointment")] == ["conflict"]
    assert picked(priya).starts_at not in [a.starts_at for a in await live_bookings(db, david_id)]


def slot(hour: int, practitioner: str = "p1", location: str = "l1", day: int = 2) -> Slot:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    start = datetime(2026, 12, day, hour, tzinfo=ZoneInfo("America/Chicago"))
    return Slot(practitioner, practitioner.upper(), location, location.upper(), "t1", start,
                start.replace(minute=30))


def test_the_next_free_slot_is_the_earliest_after_the_taken_one_same_place_first():
    taken = slot(9)
    assert next_free([slot(8), slot(10, "p2"), slot(10), slot(11)], taken) == slot(10)
    assert next_free([slot(8), slot(7, "p2")], taken) == slot(7, "p2")  # none later
    assert next_free([], taken) is None


@pytest.mark.parametrize("line", [
    "I'm sorry, someone else has just booked that time. The next one I have is 10 AM.",
    "Sorry, that slot has just been taken. Would 10 AM work?",
])
def test_the_taken_pattern_reads_paraphrases(line):
    assert TAKEN.search(line)
