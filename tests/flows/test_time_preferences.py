"""When callers want to come in, as they say it: days, vague stretches, parts of the day."""

from datetime import date, timedelta

import pytest

from language.time_preferences import (
    FLEXIBLE_DAYS,
    excluded_weekdays,
    flexible_days,
    part_of_day,
    preferred_days,
)

TODAY = date(2026, 11, 24)  # a Tuesday


def day(month: int, number: int) -> tuple[date, date]:
    return date(2026, month, number), date(2026, month, number)


@pytest.mark.parametrize(
    ("said", "days", "part"),
    [
        ("next tuesday please", day(12, 1), None),
        ("tomorrow afternoon", day(11, 25), "afternoon"),
        ("sometime next week", (date(2026, 11, 30), date(2026, 12, 6)), None),
        ("december third", day(12, 3), None),
        ("friday morning", day(11, 27), "morning"),
        ("whenever suits", None, None),
        ("towards the end of the week if you can", (date(2026, 11, 26), date(2026, 11, 28)),
         None),
        ("early next week, first thing", (date(2026, 11, 30), date(2026, 12, 1)), "morning"),
        ("could it be the weekend", (date(2026, 11, 28), date(2026, 11, 29)), None),
        ("I can only come after work", None, "evening"),
        ("something after lunch would be ideal", None, "afternoon"),
        ("in a couple of weeks", (date(2026, 12, 8), date(2026, 12, 14)), None),
        ("sometime next month", (date(2026, 12, 1), date(2026, 12, 31)), None),
    ],
)
def test_preferred_days_and_parts_of_the_day(said, days, part):
    assert preferred_days(said, TODAY) == days
    assert part_of_day(said) == part


@pytest.mark.parametrize(
    ("said", "days"),
    [
        ("not Tuesday, Thursday", day(11, 26)),
        ("Tuesday... no wait, make that Thursday", day(11, 26)),
        ("can't do Friday, but Monday's good", day(11, 30)),
        ("cancel Tuesday's and book me Friday instead", day(11, 27)),
    ],
)
def test_a_correction_or_a_day_they_cannot_do_leaves_the_day_they_can(said, days):
    assert preferred_days(said, TODAY) == days


def test_the_last_part_of_the_day_said_wins_and_a_greeting_is_not_a_preference():
    assert part_of_day("mornings are hard, actually make it the afternoon") == "afternoon"
    assert part_of_day("Good morning! I'd like to book a flu jab") is None
    assert part_of_day("not in the morning") is None


@pytest.mark.parametrize(
    "said",
    ["whenever's quickest", "whatever you've got first", "I'm not fussy", "earliest possible",
     "as soon as you can fit me in", "the first one going", "I don't mind when"],
)
def test_vague_soon_means_the_next_two_weeks(said):
    assert flexible_days(said, TODAY) == (TODAY, TODAY + timedelta(days=FLEXIBLE_DAYS - 1))


def test_days_they_cannot_do():
    assert excluded_weekdays("any day but Monday") == {0}
    assert excluded_weekdays("not Mondays or Fridays, I work then") == {0}
    assert excluded_weekdays("I can't do Wednesdays") == {2}
    assert excluded_weekdays("Monday is great") == frozenset()


def test_a_birth_date_is_not_a_day_to_come_in():
    assert preferred_days("born on July 9 1972", TODAY) is None
