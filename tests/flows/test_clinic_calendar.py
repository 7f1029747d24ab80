"""What the clinic's calendar tells a caller, from the clinic's own data: hours per location,
open now or not, a day with a closure, an address, and the after-hours greeting."""

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from db.opening import Closure
from db.scheduling import Location
from flows.clinic_calendar import (
    after_hours,
    answer,
    calendar_context,
    calendar_lines,
    place_named,
    understand,
    with_after_hours,
)

CHICAGO = ZoneInfo("America/Chicago")
DOWNTOWN = Location("loc-d", "Downtown", "America/Chicago", "120 Main Street", "+15550100110",
                    {"mon": ["08:00", "17:00"], "tue": ["08:00", "17:00"],
                     "wed": ["08:00", "17:00"], "thu": ["08:00", "19:00"],
                     "fri": ["08:00", "16:00"]})
NORTHSIDE = Location("loc-n", "Northside", "America/Chicago", "45 Lake Avenue", "+15550100111",
                     {"mon": ["09:00", "17:00"], "tue": ["09:00", "17:00"],
                      "wed": ["09:00", "17:00"], "thu": ["09:00", "17:00"],
                      "fri": ["09:00", "13:00"], "sat": ["09:00", "12:00"]})
CLINIC = [DOWNTOWN, NORTHSIDE]
MONDAY = date(2026, 12, 21)
HOLIDAYS = Closure(None, date(2026, 12, 24), date(2026, 12, 26), "the holidays")
TRAINING = Closure("loc-n", date(2026, 12, 22), date(2026, 12, 22), "staff training")
CLOSURES = [TRAINING, HOLIDAYS]


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), CHICAGO)


def asked(text: str, now: datetime, closures=CLOSURES) -> str:
    return answer(understand(text, CLINIC, closures, now), CLINIC, closures, now)


@pytest.mark.parametrize("said", [
    "What time does Northside open on Saturday?", "when does the north side clinic open saturday",
    "Is the Lake Avenue clinic open on Saturday?", "what are northside's hours on saturday",
    "is the one on lake avenue open saturday?",
])
def test_a_location_s_hours_on_a_day_are_said_for_that_location(said):
    assert asked(said, at(MONDAY - timedelta(days=7), 10)) == (
        "Our Northside clinic is open on Saturday from 9 AM to 12 PM.")


@pytest.mark.parametrize("said", [
    "are you open on the 24th?", "Are you open on the twenty-fourth?",
    "will you be open on December 24?", "are you guys open over the holidays on the 24th",
    "Will you be open for the holidays?",
])
def test_a_closure_day_is_said_closed_with_its_reason(said):
    assert asked(said, at(MONDAY, 10)) == (
        "We're closed on Thursday, December 24 for the holidays.")


def test_a_closure_is_found_by_the_words_of_its_reason():
    closures = [Closure(None, date(2027, 7, 5), date(2027, 7, 5), "the Fourth of July holiday")]
    assert asked("are you open for the fourth of july holiday?", at(date(2027, 7, 1), 10),
                 closures) == "We're closed on Monday, July 5 for the Fourth of July holiday."


def test_a_location_only_closure_leaves_the_other_location_open_that_day():
    tuesday = "Is Northside open on Tuesday?"
    assert asked(tuesday, at(MONDAY, 10)) == (
        "Our Northside clinic is closed tomorrow for staff training.")
    assert asked("are you open tomorrow?", at(MONDAY, 10)) == (
        "We're open tomorrow at Downtown from 8 AM to 5 PM.")


@pytest.mark.parametrize(("said", "where"), [
    ("Where's your downtown office?", "Our Downtown clinic is at 120 Main Street."),
    ("What's the address of the Northside clinic?", "Our Northside clinic is at 45 Lake Avenue."),
    ("how do I get to the lake ave clinic", "Our Northside clinic is at 45 Lake Avenue."),
    ("where are you?", ("Our Downtown clinic is at 120 Main Street. "
                        "Our Northside clinic is at 45 Lake Avenue.")),
])
def test_addresses_are_said_per_location(said, where):
    assert asked(said, at(MONDAY, 10)) == where


def test_open_now_is_answered_for_the_location_and_for_the_clinic():
    monday_morning, tuesday_evening = at(MONDAY, 10), at(MONDAY + timedelta(days=1), 18)
    assert asked("is the lake avenue clinic open now?", monday_morning) == (
        "Yes, our Northside clinic is open now, until 5 PM.")
    assert asked("Is Downtown still open?", tuesday_evening) == (
        "No, our Downtown clinic is closed right now; it opens again tomorrow at 8 AM.")
    assert asked("are you open right now?", monday_morning) == (
        "Yes, we're open now: Downtown until 5 PM and Northside until 5 PM.")
    # Monday night: Northside's training day is tomorrow, Downtown opens at 8
    assert asked("is northside open at the moment", at(MONDAY, 21)) == (
        "No, our Northside clinic is closed right now for staff training; it opens again "
        "Wednesday at 9 AM.")
    assert asked("are you open now?", at(MONDAY, 21)) == (
        "No, we're closed right now; we open again tomorrow at 8 AM at our Downtown clinic.")


def test_asked_about_today_once_it_has_closed_the_answer_is_when_it_opens_next():
    assert asked("are you open today?", at(MONDAY, 7)) == (
        "We're open today at Downtown from 8 AM to 5 PM and at Northside from 9 AM to 5 PM.")
    assert asked("are you open today?", at(MONDAY, 21)) == (
        "No, we're closed right now; we open again tomorrow at 8 AM at our Downtown clinic.")


def test_the_week_s_hours_come_with_the_closures_of_the_coming_days():
    said = asked("what are your opening hours?", at(MONDAY, 10))
    assert said.startswith("We're open at Downtown Monday to Wednesday 8 AM to 5 PM, ")
    assert said.endswith("Please note that our Northside clinic is closed December 22 for "
                         "staff training and we're closed December 24 to 26 for the holidays.")
    assert asked("what are your hours?", at(MONDAY - timedelta(days=30), 10)).endswith(
        "Saturday 9 AM to 12 PM.")  # nothing closed in the coming fortnight: nothing noted


def test_weekdays_in_general_are_the_usual_hours():
    assert asked("are you open on saturdays?", at(MONDAY, 10)) == (
        "We're open on Saturdays at Northside from 9 AM to 12 PM.")
    assert asked("is downtown open on sundays", at(MONDAY, 10)) == (
        "Our Downtown clinic is closed on Sundays.")


def test_a_place_is_named_by_its_name_its_street_or_the_name_said_apart():
    assert place_named("your downtown office", CLINIC) is DOWNTOWN
    assert place_named("the north side one", CLINIC) is NORTHSIDE
    assert place_named("the clinic on Lake Avenue", CLINIC) is NORTHSIDE
    assert place_named("the main street clinic", CLINIC) is DOWNTOWN
    assert place_named("either of them", CLINIC) is None
    assert place_named("downtown or northside", CLINIC) is None  # two: neither


def test_a_closure_covering_everything_is_said_honestly_without_a_date():
    rebuilding = [Closure(None, MONDAY, MONDAY + timedelta(days=200), "rebuilding works")]
    assert asked("are you open now?", at(MONDAY, 10), rebuilding) == (
        "No, we're closed right now for rebuilding works, and I don't have a date we open "
        "again.")
    closed = after_hours(CLINIC, rebuilding, at(MONDAY, 10), dialled=None,
                         emergency_number="112")
    assert closed.next_opening is None and closed.reason == "rebuilding works"
    assert closed.line.startswith("We're closed right now for rebuilding works, and I don't "
                                  "have a date we open again.")
    assert closed.line.endswith("please hang up and call 112.")


def test_the_after_hours_line_names_the_dialled_location_or_the_clinic():
    evening = at(MONDAY, 21)
    clinic = after_hours(CLINIC, CLOSURES, evening, dialled="+15550100100",
                         emergency_number="911")
    assert clinic.line == (
        "We're closed right now; we open again tomorrow at 8 AM. I can still book an "
        "appointment or take a message for a callback, and if this is an emergency, please "
        "hang up and call 911.")
    northside = after_hours(CLINIC, CLOSURES, evening, dialled="+15550100111",
                            emergency_number="911")
    assert northside.line.startswith("Our Northside clinic is closed right now for staff "
                                     "training; it opens again Wednesday at 9 AM.")
    assert northside.event() == {"place": "Northside", "reason": "staff training",
                                 "next_opening": "2026-12-23T09:00:00-06:00"}
    # open: nothing is added
    assert after_hours(CLINIC, CLOSURES, at(MONDAY, 10), dialled=None,
                       emergency_number="911") is None
    # a location-only closure while the other location is open: the clinic is open
    assert after_hours(CLINIC, CLOSURES, at(MONDAY + timedelta(days=1), 10), dialled=None,
                       emergency_number="911") is None


def test_the_after_hours_line_goes_before_the_greeting_s_question():
    greeting = "Thank you for calling Demo Clinic. This is the scheduling assistant. How can I help?"
    assert with_after_hours(greeting, "We're closed right now.") == (
        "Thank you for calling Demo Clinic. This is the scheduling assistant. We're closed "
        "right now. How can I help?")
    assert with_after_hours("Hello from Demo Clinic.", "We're closed right now.") == (
        "Hello from Demo Clinic. We're closed right now.")
    assert with_after_hours("How can I help?", "We're closed.") == "We're closed. How can I help?"


def test_the_llm_knows_whether_it_is_open_the_next_opening_and_the_closures_ahead():
    assert calendar_context(CLINIC, CLOSURES, at(MONDAY, 21)) == (
        "Now (Monday 9 PM at the clinic): closed; opens next: Downtown tomorrow at 8 AM. "
        "Closed in the next 14 days: December 22, Northside (staff training); "
        "December 24 to 26, every location (the holidays).")
    assert calendar_context(CLINIC, [], at(MONDAY, 10), dialled="+15550100111") == (
        "Now (Monday 10 AM at the clinic): open: Northside until 5 PM.")


def test_every_calendar_line_is_there_and_uses_only_known_fields():
    lines = calendar_lines()
    assert lines.after_hours and lines.answers
    assert all("{emergency_number}" in line for line in lines.after_hours.values())
