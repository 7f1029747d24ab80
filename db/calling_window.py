"""When an outbound call may be placed (pure).

Three rules hold at once, each in its own timezone: the task's own window (e.g.
9 am to 5 pm on weekdays, in the task's timezone), the patient's calling hours (never
before 8 am or after 9 pm where the patient is), and the clinic's business hours (some
location open, in that location's timezone, closures honoured; a location with no
opening hours on record holds no call back: its hours are unknown, not "never open").
The next calling time is the first moment all three allow, found by moving to the
earliest moment the failing rule allows until none fails; nothing within the bound is
an honest None.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from db.opening import Closure, Place, earliest_opening, is_open

CALLING_HOURS = (time(8), time(21))  # the patient's local time
SEARCH_DAYS = 21


@dataclass(frozen=True)
class DailyWindow:
    """Local hours on some weekdays (0 = Monday), in a timezone."""

    start: time
    end: time
    days: tuple[int, ...]
    timezone: str

    def next_open(self, moment: datetime) -> datetime | None:
        """`moment` when it is inside the window, else the window's next start."""
        zone = ZoneInfo(self.timezone)
        local = moment.astimezone(zone)
        for offset in range(8):
            day = local.date() + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            start = datetime.combine(day, self.start, zone)
            end = datetime.combine(day, self.end, zone)
            if moment < end:
                return max(moment, start)
        return None


def calling_hours(patient_timezone: str) -> DailyWindow:
    return DailyWindow(CALLING_HOURS[0], CALLING_HOURS[1], (0, 1, 2, 3, 4, 5, 6),
                       patient_timezone)


def next_calling_time(
    now: datetime, *, task_window: DailyWindow, patient_timezone: str,
    places: Sequence[Place] = (), closures: Iterable[Closure] = (),
    search_days: int = SEARCH_DAYS,
) -> datetime | None:
    """The first moment from `now` the task may be dialled; None when there is none
    within `search_days` (no window day, the clinic closed throughout)."""
    closures = list(closures)
    places = [place for place in places if place.opening_hours]
    windows = (task_window, calling_hours(patient_timezone))
    moment, limit = now, now + timedelta(days=search_days)
    while moment <= limit:
        later = moment
        for window in windows:
            opens = window.next_open(later)
            if opens is None:
                return None
            later = opens
        if places and not any(is_open(p, later, closures) for p in places):
            opening = earliest_opening(places, later, closures, within_days=search_days)
            if opening is None:
                return None
            later = opening.at
        if later == moment:
            return moment
        moment = later
    return None

