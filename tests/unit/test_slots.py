"""Open slots come from weekly hours minus bookings, on the schedule's grid, in local time."""

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from db.opening import Closure
from db.slots import Booked, WeeklyHours, open_slots, spread

ZONE = ZoneInfo("America/Chicago")
CHECKUP = "type-checkup"
MONDAY = date(2026, 11, 23)


def hours(weekday: int = 0, practitioner: str = "p1", name: str = "Dr. Rivera") -> WeeklyHours:
    return WeeklyHours(
        practitioner_id=practitioner, practitioner_name=name, location_id="loc",
        location_name="Downtown", timezone="America/Chicago", weekday=weekday,
        starts=time(9), ends=time(11), appointment_type_ids=frozenset({CHECKUP}),
    )


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), ZONE)


def slots(schedules, booked=(), **overrides):
    args = dict(
        appointment_type_id=CHECKUP, duration=timedelta(minutes=30), first_day=MONDAY,
        last_day=MONDAY + timedelta(days=13), not_before=at(MONDAY, 0),
    )
    args.update(overrides)
    return open_slots(schedules, booked, **args)


def test_a_mornings_hours_give_a_slot_every_duration_on_each_matching_day():
    found = slots([hours()])
    assert [s.starts_at for s in found[:4]] == [
        at(MONDAY, 9), at(MONDAY, 9, 30), at(MONDAY, 10), at(MONDAY, 10, 30),
    ]
    assert len(found) == 8  # two Mondays in the fortnight, four slots each
    assert found[0].practitioner_name == "Dr. Rivera" and found[0].location_name == "Downtown"


def test_booked_times_and_anything_overlapping_them_are_not_offered():
    booked = [Booked("p1", at(MONDAY, 9, 15), at(MONDAY, 9, 45))]  # another type's length
    starts = [s.starts_at for s in slots([hours()], booked)][:2]
    assert starts == [at(MONDAY, 10), at(MONDAY, 10, 30)]


def test_another_practitioners_booking_blocks_nothing():
    booked = [Booked("p2", at(MONDAY, 9), at(MONDAY, 9, 30))]
    assert slots([hours()], booked)[0].starts_at == at(MONDAY, 9)


def test_past_times_types_not_offered_and_other_parts_of_the_day_are_left_out():
    assert slots([hours()], not_before=at(MONDAY, 10))[0].starts_at == at(MONDAY, 10)
    assert slots([hours()], appointment_type_id="type-surgery") == []
    assert slots([hours()], part_of_day="afternoon") == []
    assert len(slots([hours()], part_of_day="morning")) == 8


def test_slots_keep_local_wall_clock_time_across_a_daylight_saving_change():
    # US clocks fall back on 2026-11-01: the Mondays either side both start at 9:00 local
    found = slots(
        [hours()], first_day=date(2026, 10, 26), last_day=date(2026, 11, 2),
        not_before=at(date(2026, 10, 26), 0),
    )
    assert {s.starts_at.hour for s in found if s.starts_at.minute == 0} == {9, 10}
    assert found[0].starts_at.utcoffset() != found[-1].starts_at.utcoffset()


def test_a_readout_spreads_choices_over_days():
    found = slots([hours(0), hours(2, "p2", "Dr. Chen")])
    chosen = spread(found, 3)
    assert len(chosen) == 3
    assert len({s.starts_at.date() for s in chosen}) == 3
    assert chosen[0] == found[0]


def test_no_slot_is_offered_on_a_day_the_location_or_the_whole_clinic_is_closed():
    second_monday = MONDAY + timedelta(days=7)
    holiday = Closure(None, MONDAY, MONDAY, "a holiday")
    assert {s.starts_at.date() for s in slots([hours()], closures=[holiday])} == {second_monday}
    elsewhere = Closure("another-location", MONDAY, second_monday, "repairs")
    assert len(slots([hours()], closures=[elsewhere])) == 8  # another location's: no matter
    here = Closure("loc", MONDAY, second_monday, "repairs")
    assert slots([hours()], closures=[here]) == []
