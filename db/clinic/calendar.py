"""Weekly hours and closures as rows: one schedule row per practitioner, location,
weekday and block (as stored), one closure row per date range.

A file can group the same hours many ways; comparing rows, not entries, is what makes
an export imported again a change of nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, time

from db.clinic.model import WEEKDAYS, ClinicFile, ClosureEntry, ScheduleEntry

# What `schedules.valid_from` holds when the file gives no start.
ALWAYS = date(2000, 1, 1)


@dataclass(frozen=True)
class ScheduleRow:
    practitioner: str
    location: str
    weekday: int  # 0 = Monday
    starts: time
    ends: time
    offers: tuple[str, ...]  # appointment type names, in the file's order
    valid_from: date = ALWAYS
    valid_until: date | None = None

    @property
    def identity(self) -> tuple:
        """What makes two rows the same hours (the order of `offers` does not)."""
        return (self.practitioner, self.location, self.weekday, self.starts, self.ends,
                frozenset(self.offers), self.valid_from, self.valid_until)


@dataclass(frozen=True)
class ClosureRow:
    location: str | None  # None: every location
    starts_on: date
    ends_on: date
    reason: str


def schedule_rows(clinic: ClinicFile) -> list[ScheduleRow]:
    return [
        ScheduleRow(entry.practitioner, entry.location, WEEKDAYS.index(day), starts, ends,
                    tuple(dict.fromkeys(entry.offers)), entry.valid_from or ALWAYS,
                    entry.valid_until)
        for entry in clinic.schedules
        for day in dict.fromkeys(entry.days)
        for starts, ends in entry.blocks
    ]


def closure_rows(clinic: ClinicFile) -> list[ClosureRow]:
    return [ClosureRow(entry.location, entry.from_, entry.last_day, entry.reason)
            for entry in clinic.closures]


def same_hours(one: list[ScheduleRow], other: list[ScheduleRow]) -> bool:
    return {row.identity for row in one} == {row.identity for row in other}


def schedule_entries(rows: list[ScheduleRow]) -> list[ScheduleEntry]:
    """Rows grouped back into entries: one per practitioner, location, offer and period,
    days with the same blocks together."""
    groups: dict[tuple, dict[int, list[tuple[time, time]]]] = {}
    for row in rows:
        key = (row.practitioner, row.location, row.offers, row.valid_from, row.valid_until)
        groups.setdefault(key, {}).setdefault(row.weekday, []).append((row.starts, row.ends))
    entries = []
    for (practitioner, location, offers, valid_from, valid_until), days in groups.items():
        by_blocks: dict[tuple, list[int]] = {}
        for weekday in sorted(days):
            by_blocks.setdefault(tuple(sorted(set(days[weekday]))), []).append(weekday)
        for blocks, weekdays in by_blocks.items():
            entries.append(ScheduleEntry(
                practitioner=practitioner, location=location,
                days=[WEEKDAYS[d] for d in weekdays], blocks=list(blocks), offers=list(offers),
                valid_from=None if valid_from == ALWAYS else valid_from,
                valid_until=valid_until))
    return sorted(entries, key=lambda e: (e.practitioner, e.location, WEEKDAYS.index(e.days[0]),
                                          e.blocks[0][0], e.valid_from or ALWAYS))


def closure_entries(rows: list[ClosureRow]) -> list[ClosureEntry]:
    ordered = sorted(rows, key=lambda r: (r.starts_on, r.ends_on, r.location or "", r.reason))
    return [ClosureEntry(from_=row.starts_on,
                         to=None if row.ends_on == row.starts_on else row.ends_on,
                         reason=row.reason, location=row.location) for row in ordered]
