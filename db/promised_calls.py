"""When a call the clinic promises can come: the clinic's business hours as a task's
daily window, and the first moment the dispatcher may dial it.

A promise is only as good as the time it names, so the time told to a caller is the
one the dispatcher will use: `db.calling_window.next_calling_time` over the task's
window, the callee's calling hours and the clinic's opening hours and closures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, time

from db.calling_window import DailyWindow, calling_hours, next_calling_time
from db.opening import Closure, Place, weekly_blocks

BUSINESS_HOURS = (time(9), time(17))  # a clinic with no opening hours on record
WEEKDAYS = (0, 1, 2, 3, 4)


def clinic_window(places: Sequence[Place], timezone: str) -> DailyWindow:
    """The clinic's business hours as one daily window in `timezone`: from the earliest
    opening to the latest closing of its locations in that timezone, on the days any of
    them opens. When its hours are kept in another timezone the window is the callee's
    calling hours (each location's own hours are checked when the call is placed); with
    no hours on record, 9 to 5 on weekdays."""
    blocks = [(day, block) for place in places if place.timezone == timezone
              for day in range(7) for block in weekly_blocks(place.opening_hours, day)]
    if not blocks:
        if any(place.opening_hours for place in places):
            return calling_hours(timezone)
        return DailyWindow(*BUSINESS_HOURS, WEEKDAYS, timezone)
    start = min(opens for _, (opens, _) in blocks)
    end = max(closes for _, (_, closes) in blocks)
    return DailyWindow(start, end, tuple(sorted({day for day, _ in blocks})), timezone)


def first_call(now: datetime, *, window: DailyWindow, callee_timezone: str,
               places: Sequence[Place] = (), closures: Iterable[Closure] = ()
               ) -> datetime | None:
    """The first moment from `now` the call may be placed (None: none in the next weeks).
    Locations with no opening hours on record do not hold a call back."""
    return next_calling_time(now, task_window=window, patient_timezone=callee_timezone,
                             places=[p for p in places if p.opening_hours], closures=closures)
