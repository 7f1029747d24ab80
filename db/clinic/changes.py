"""What an import changed, and what it means for bookings, in the words the operator
reads (counts of bookings, never whose they are)."""

from __future__ import annotations

from db.clinic.bookings import Misplaced
from db.clinic.calendar import ClosureRow, ScheduleRow
from db.clinic.model import WEEKDAYS


def hours_changes(before: list[ScheduleRow], after: list[ScheduleRow]) -> list[str]:
    def by_person(rows: list[ScheduleRow]) -> dict[str, set[tuple]]:
        grouped: dict[str, set[tuple]] = {}
        for row in rows:
            grouped.setdefault(row.practitioner, set()).add(row.identity)
        return grouped

    old, new = by_person(before), by_person(after)
    changes = []
    for person in sorted(old.keys() | new.keys()):
        if person not in old:
            changes.append(f"hours of '{person}' added ({_days(new[person])})")
        elif person not in new:
            changes.append(f"hours of '{person}' removed")
        elif old[person] != new[person]:
            changes.append(f"hours of '{person}' changed ({_days(new[person])})")
    return changes


def _days(identities: set[tuple]) -> str:
    return ", ".join(WEEKDAYS[day] for day in sorted({identity[2] for identity in identities}))


def closure_changes(before: list[ClosureRow], after: list[ClosureRow]) -> list[str]:
    def said(row: ClosureRow) -> str:
        days = str(row.starts_on) if row.ends_on == row.starts_on else (
            f"{row.starts_on} to {row.ends_on}")
        return f"closure {days}{f' at {row.location}' if row.location else ''} ({row.reason})"

    return ([f"{said(row)} added" for row in after if row not in before]
            + [f"{said(row)} removed" for row in before if row not in after])


def booking_warnings(before: Misplaced, after: Misplaced) -> list[str]:
    """Bookings this change put outside the hours or on a closure, counted (never named)."""
    warnings = []
    outside = len(after.outside_hours - before.outside_hours)
    if outside:
        warnings.append(f"{_bookings(outside)} now outside the practitioner's hours: kept as "
                        "booked; move them with the patients if needed")
    closed = len(after.on_closure - before.on_closure)
    if closed:
        warnings.append(f"{_bookings(closed)} now on a closure: kept as booked; tell those "
                        "patients or move them")
    return warnings


def _bookings(count: int) -> str:
    return "1 upcoming booking falls" if count == 1 else f"{count} upcoming bookings fall"
