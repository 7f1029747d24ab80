"""The deterministic engine understands dates, names, choices and services as callers say them."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from db.scheduling import AppointmentType
from db.slots import Slot
from language.understanding import (
    appointment_type,
    date_of_birth,
    named,
    slot_choice,
    spoken_numbers_to_digits,
)

TODAY = date(2026, 11, 24)  # a Tuesday
ZONE = ZoneInfo("America/Chicago")


@pytest.mark.parametrize(
    ("said", "born"),
    [
        ("march fourteenth nineteen forty eight", date(1948, 3, 14)),
        ("It's 14 March 1948", date(1948, 3, 14)),
        ("the third of may two thousand and five", date(2005, 5, 3)),
        ("03/14/1948", date(1948, 3, 14)),
        ("my birthday is june 2nd 1975", date(1975, 6, 2)),
        ("last tuesday", None),  # not a full date
        ("november thirtieth twenty thirty", None),  # in the future
    ],
)
def test_dates_of_birth_spoken_or_typed(said, born):
    assert date_of_birth(said, TODAY) == born


def test_spoken_numbers_become_digits_and_other_words_stay():
    assert spoken_numbers_to_digits("twenty twenty six") == "2026"
    assert spoken_numbers_to_digits("nineteen oh five") == "1905"
    assert spoken_numbers_to_digits("the twenty first at nine") == "the 21 at 9"


@pytest.mark.parametrize(
    ("said", "born"),
    [
        ("seven nine seventy two", date(1972, 7, 9)),
        ("oh seven, oh nine, seventy-two", date(1972, 7, 9)),
        ("July ninth seventy-two", date(1972, 7, 9)),
        ("the ninth of July 1972", date(1972, 7, 9)),
        ("7/9/72", date(1972, 7, 9)),
        ("25 12 1960", date(1960, 12, 25)),  # the day first when it cannot be a month
        ("2 3 05", date(2005, 2, 3)),  # a two-digit year is the latest one not to come
    ],
)
def test_dates_of_birth_in_the_ways_people_say_them_when_asked(said, born):
    assert date_of_birth(said, TODAY, bare=True) == born


def test_bare_numbers_are_a_date_only_when_one_was_asked_for():
    assert date_of_birth("room seven nine seventy two", TODAY) is None
    assert date_of_birth("three one two five five five zero one nine nine", TODAY,
                         bare=True) is None  # a phone number is not a date


def test_a_practitioner_or_location_is_named_by_any_of_its_words():
    staff = ["Dr. Maya Patel", "Aisha Rahman", "Leo Martin", "Dr. Leo Brandt"]
    assert named("could I see Dr Patel this time", staff) == "Dr. Maya Patel"
    assert named("with aisha if she's free", staff) == "Aisha Rahman"
    assert named("leo please", staff) is None  # two Leos: neither
    assert named("Leo Martin please", staff) == "Leo Martin"
    assert named("anyone is fine", staff) is None


TYPES = [
    AppointmentType("t1", "Physiotherapy session", "", 45, 11000, "USD", ("physio", "back pain")),
    AppointmentType("t2", "Annual physical", "", 30, 12000, "USD", ("physical", "checkup")),
    AppointmentType("t3", "Flu shot", "", 15, 3000, "USD", ("flu", "jab")),
]


def test_services_are_recognised_by_name_or_what_callers_call_them():
    assert appointment_type("I need some physio for my back", TYPES).id == "t1"
    assert appointment_type("just my annual checkup", TYPES).id == "t2"
    assert appointment_type("can I get a flu jab", TYPES).id == "t3"
    # "physical" is a keyword of the physical, but "physiotherapy session" is longer
    assert appointment_type("a physiotherapy session", TYPES).id == "t1"
    assert appointment_type("a haircut", TYPES) is None


def offered() -> list[tuple[str, Slot]]:
    def at(day: int, hour: int, minute: int, who: str) -> Slot:
        start = datetime(2026, 11, 24 + day, hour, minute, tzinfo=ZONE)
        return Slot("p", who, "l", "Downtown", "t", start, start + timedelta(minutes=30))

    return [("S1", at(0, 9, 30, "Dr. Maya Patel")), ("S2", at(1, 14, 0, "Dr. James Okafor"))]


@pytest.mark.parametrize(
    ("said", "ref"),
    [
        ("the first one", "S1"),
        ("second please", "S2"),
        ("the later one", "S2"),
        ("9:30 works", "S1"),
        ("nine thirty", "S1"),
        ("two pm", "S2"),
        ("the wednesday", "S2"),
        ("with doctor okafor", "S2"),
        ("hmm not sure", None),
        ("ten o'clock", None),
        ("I'll take the earlier one please", "S1"),
        # An order word that does not name a slot is not a choice.
        ("actually I have to check my diary first, thanks bye", None),
        ("can you call me back later today instead", None),
    ],
)
def test_the_caller_picks_an_offered_slot_by_order_time_day_or_name(said, ref):
    assert slot_choice(said, offered()) == ref
