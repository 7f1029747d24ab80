"""When an outbound call may be placed: the task's window, the patient's 8 am to 9 pm,
and the clinic's opening hours, each in its own timezone."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from db.calling_window import DailyWindow, next_calling_time
from db.opening import Closure

NEW_YORK, DENVER, HONOLULU = ZoneInfo("America/New_York"), ZoneInfo("America/Denver"), ZoneInfo("Pacific/Honolulu")
WEEKDAYS_9_TO_5 = DailyWindow(time(9), time(17), (0, 1, 2, 3, 4), "America/Denver")
ALL_DAY = DailyWindow(time(0), time(23, 59), (0, 1, 2, 3, 4, 5, 6), "UTC")


@dataclass(frozen=True)
class Clinic:
    id: str = "loc-1"
    name: str = "Main Street"
    timezone: str = "America/Denver"
    opening_hours: dict = field(default_factory=lambda: {
        d: ["08:00", "17:00"] for d in ("mon", "tue", "wed", "thu", "fri")})


def test_inside_every_window_the_call_goes_now():
    now = datetime(2026, 12, 1, 10, 30, tzinfo=DENVER)  # a Tuesday
    assert next_calling_time(now, task_window=WEEKDAYS_9_TO_5, patient_timezone="America/Denver",
                             places=[Clinic()]) == now


def test_friday_evening_waits_for_monday_morning():
    friday_evening = datetime(2026, 12, 4, 18, 0, tzinfo=DENVER)
    assert next_calling_time(friday_evening, task_window=WEEKDAYS_9_TO_5,
                             patient_timezone="America/Denver", places=[Clinic()]
                             ) == datetime(2026, 12, 7, 9, 0, tzinfo=DENVER)


def test_a_patient_two_hours_ahead_is_never_called_after_nine_at_night_their_time():
    # 7:30 pm in Denver is 9:30 pm in New York: the task and clinic allow it, the patient's
    # hours do not; the next morning at 9 in Denver is 11 am in New York.
    evening = datetime(2026, 12, 1, 19, 30, tzinfo=DENVER)
    late_task = DailyWindow(time(8), time(21), (0, 1, 2, 3, 4, 5, 6), "America/Denver")
    found = next_calling_time(evening, task_window=late_task, patient_timezone="America/New_York")
    assert found == datetime(2026, 12, 2, 8, 0, tzinfo=DENVER)  # 10 am in New York


def test_a_patient_far_behind_is_not_called_before_eight_in_the_morning_their_time():
    # 9 am in Denver is 6 am in Honolulu: the call waits until 8 am there (11 am Denver).
    morning = datetime(2026, 12, 1, 9, 0, tzinfo=DENVER)
    found = next_calling_time(morning, task_window=WEEKDAYS_9_TO_5,
                              patient_timezone="Pacific/Honolulu", places=[Clinic()])
    assert found == datetime(2026, 12, 1, 8, 0, tzinfo=HONOLULU)
    assert found.astimezone(DENVER).hour == 11


def test_a_clinic_closure_moves_the_call_past_it():
    monday = datetime(2026, 12, 7, 10, 0, tzinfo=DENVER)
    closed = Closure(None, date(2026, 12, 7), date(2026, 12, 8), "Staff training")
    assert next_calling_time(monday, task_window=WEEKDAYS_9_TO_5, patient_timezone="America/Denver",
                             places=[Clinic()], closures=[closed]
                             ) == datetime(2026, 12, 9, 9, 0, tzinfo=DENVER)


def test_no_window_that_ever_opens_is_an_honest_none():
    never = DailyWindow(time(9), time(17), (), "UTC")
    assert next_calling_time(datetime(2026, 12, 1, tzinfo=DENVER), task_window=never,
                             patient_timezone="UTC") is None
    closed_for_a_month = Closure(None, date(2026, 12, 1), date(2027, 1, 31), "Renovation")
    assert next_calling_time(datetime(2026, 12, 1, 10, tzinfo=DENVER), task_window=ALL_DAY,
                             patient_timezone="America/Denver", places=[Clinic()],
                             closures=[closed_for_a_month]) is None


def test_a_location_with_no_opening_hours_on_record_does_not_hold_a_call_back():
    """The clinic's hours are unknown, not "never open": the call goes in the task's own
    window and the callee's hours, as the caller was told when it was promised."""
    now = datetime(2026, 12, 1, 10, 30, tzinfo=DENVER)
    no_hours = Clinic(opening_hours={})
    assert next_calling_time(now, task_window=WEEKDAYS_9_TO_5, patient_timezone="America/Denver",
                             places=[no_hours]) == now
