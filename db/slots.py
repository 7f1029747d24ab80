"""Open appointment slots from weekly schedules minus live bookings (pure computation).

Schedules are local wall-clock hours at a location; a slot starts on the schedule's
grid (every `duration` from its start) and is open when it fits before the schedule
ends, starts after `not_before`, overlaps no live booking of that practitioner, and is
on no day a closure shuts its location (or the whole clinic).
Times are computed in the location's timezone, so a slot at 9:00 stays at 9:00 across
a daylight-saving change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from db.opening import Closure


@dataclass(frozen=True)
class WeeklyHours:
    """One schedule row: a practitioner's hours at a location on one weekday."""

    practitioner_id: str
    practitioner_name: str
    location_id: str
    location_name: str
    timezone: str
    weekday: int  # 0 = Monday
    starts: time
    ends: time
    appointment_type_ids: frozenset[str]
    valid_from: date = date(2000, 1, 1)
    valid_until: date | None = None


@dataclass(frozen=True)
class Booked:
    practitioner_id: str
    starts_at: datetime
    ends_at: datetime


@dataclass(frozen=True)
class Slot:
    """An open time: what a caller is offered (the ids stay server-side)."""

    practitioner_id: str
    practitioner_name: str
    location_id: str
    location_name: str
    appointment_type_id: str
    starts_at: datetime  # aware, in the location's timezone
    ends_at: datetime

    @property
    def key(self) -> tuple[str, str, datetime]:
        return (self.practitioner_id, self.appointment_type_id, self.starts_at)


PART_OF_DAY = {"morning": (time(0), time(12)), "afternoon": (time(12), time(17)),
               "evening": (time(17), time(23, 59))}


def open_slots(
    schedules: Iterable[WeeklyHours],
    booked: Iterable[Booked],
    *,
    appointment_type_id: str,
    duration: timedelta,
    first_day: date,
    last_day: date,
    not_before: datetime,
    part_of_day: str | None = None,
    closures: Iterable[Closure] = (),
) -> list[Slot]:
    """Every open slot for the type between the two days (inclusive), earliest first."""
    busy: dict[str, list[Booked]] = {}
    for booking in booked:
        busy.setdefault(booking.practitioner_id, []).append(booking)
    window = PART_OF_DAY.get(part_of_day or "")
    closures = list(closures)
    slots: list[Slot] = []
    for hours in schedules:
        if appointment_type_id not in hours.appointment_type_ids:
            continue
        zone = ZoneInfo(hours.timezone)
        for day in _days(first_day, last_day, hours.weekday):
            if day < hours.valid_from or (hours.valid_until and day > hours.valid_until):
                continue
            if any(closure.covers(day, hours.location_id) for closure in closures):
                continue
            start = datetime.combine(day, hours.starts, zone)
            close = datetime.combine(day, hours.ends, zone)
            while start + duration <= close:
                end = start + duration
                if (
                    start >= not_before
                    and (window is None or window[0] <= start.time() < window[1])
                    and not _overlaps(busy.get(hours.practitioner_id, ()), start, end)
                ):
                    slots.append(Slot(
                        hours.practitioner_id, hours.practitioner_name, hours.location_id,
                        hours.location_name, appointment_type_id, start, end,
                    ))
                start = end
    slots.sort(key=lambda slot: (slot.starts_at, slot.practitioner_name))
    return slots


def spread(slots: Sequence[Slot], count: int) -> list[Slot]:
    """A few slots to read out: the earliest, then one per later day, so a caller hears choices;
    when the slots span fewer days, the next earliest times fill in."""
    chosen: list[Slot] = []
    days: set[date] = set()
    for slot in slots:
        day = slot.starts_at.date()
        if day not in days:
            chosen.append(slot)
            days.add(day)
        if len(chosen) == count:
            return chosen
    for slot in slots:  # fewer days than choices: the next earliest times
        if slot not in chosen:
            chosen.append(slot)
        if len(chosen) == count:
            break
    return sorted(chosen, key=lambda slot: slot.starts_at)


def _days(first: date, last: date, weekday: int) -> Iterable[date]:
    day = first + timedelta(days=(weekday - first.weekday()) % 7)
    while day <= last:
        yield day
        day += timedelta(days=7)


def _overlaps(bookings: Iterable[Booked], start: datetime, end: datetime) -> bool:
    return any(b.starts_at < end and start < b.ends_at for b in bookings)
