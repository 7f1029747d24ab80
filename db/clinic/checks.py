"""The rules that hold between a clinic file's entries: names that resolve, hours that
make sense, numbers given once, nobody in two places at once.

Each rule returns (path, plain reason) pairs; `line_of` lets a reason point at the
other entry involved ("the first is at line 12").
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from datetime import date, time
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from db.clinic.model import VERSION, WEEKDAYS, LocationEntry, ScheduleEntry
from db.clinic.problems import Path, render_path
from db.clinic.sections import NAMED, Sections

LineOf = Callable[[Path], int | None]
Found = list[tuple[Path, str]]

_ITEM = {"locations": "location", "practitioners": "practitioner",
         "appointment_types": "appointment type"}


def check_sections(sections: Sections, line_of: LineOf) -> Found:
    """Every rule, over the entries that are valid on their own."""
    return [*_version(sections), *_duplicate_names(sections, line_of), *_numbers(sections),
            *_locations(sections), *_schedules(sections), *_overlaps(sections, line_of),
            *_closures(sections)]


def _version(sections: Sections) -> Found:
    version = sections.version
    if isinstance(version, int) and not isinstance(version, bool) and version != VERSION:
        return [(("version",), (f"version {version} is not supported: this service reads "
                               f"version {VERSION}"))]
    return []


def _duplicate_names(sections: Sections, line_of: LineOf) -> Found:
    found: Found = []
    for section in NAMED:
        first: dict[str, int] = {}
        for index, entry in getattr(sections, section):
            key = entry.name.casefold()
            if key in first:
                other = _where(line_of, (section, first[key]))
                found.append(((section, index, "name"),
                              (f"a second {_ITEM[section]} named '{entry.name}' "
                              f"(the first is at {other})")))
            else:
                first[key] = index
    return found


def _numbers(sections: Sections) -> Found:
    found: Found = []
    own: set[str] = set()
    if sections.clinic is not None:
        for index, number in enumerate(sections.clinic.phone_numbers):
            if number in own:
                found.append((("clinic", "phone_numbers", index), f"{number} is listed twice"))
            own.add(number)
    for index, location in sections.locations:
        if location.phone_number is not None and location.phone_number in own:
            found.append((("locations", index, "phone_number"),
                          (f"{location.phone_number} is one of the clinic's own numbers: a "
                          "transfer there would ring this agent again")))
    return found


def _locations(sections: Sections) -> Found:
    found: Found = []
    for index, location in sections.locations:
        if not _zone_exists(location.timezone):
            guess = _guess(location.timezone, _zones(), cutoff=0.85)
            found.append((("locations", index, "timezone"),
                          (f"unknown timezone '{location.timezone}'{guess} (a name from the "
                          "tz database, e.g. America/Chicago)")))
        for day in WEEKDAYS:
            hours = location.opening_hours.on(day)
            if hours is not None and hours[1] <= hours[0]:
                found.append((("locations", index, "opening_hours", day),
                              (f"{location.name} closes at {_hhmm(hours[1])} on {day}, "
                              f"{'when' if hours[1] == hours[0] else 'before'} it opens "
                              f"at {_hhmm(hours[0])}")))
    return found


def _schedules(sections: Sections) -> Found:
    found: Found = []
    places = {location.name: location for _, location in sections.locations}
    for index, schedule in sections.schedules:
        at: Path = ("schedules", index)
        found += _reference(sections, "practitioners", schedule.practitioner,
                            (*at, "practitioner"))
        found += _reference(sections, "locations", schedule.location, (*at, "location"))
        for offer, name in enumerate(schedule.offers):
            found += _reference(sections, "appointment_types", name, (*at, "offers", offer))
        seen: set[str] = set()
        for number, day in enumerate(schedule.days):
            if day in seen:
                found.append(((*at, "days", number), f"'{day}' is listed twice"))
            seen.add(day)
        for number, (starts, ends) in enumerate(schedule.blocks):
            if ends <= starts:
                found.append(((*at, "blocks", number),
                              (f"the block {_span(starts, ends)} ends "
                              f"{'when' if ends == starts else 'before'} it starts")))
        if schedule.valid_from and schedule.valid_until and (
                schedule.valid_until < schedule.valid_from):
            found.append(((*at, "valid_until"),
                          (f"valid_until {schedule.valid_until} is before valid_from "
                          f"{schedule.valid_from}")))
        if schedule.location in places:
            found += _outside_hours(schedule, places[schedule.location], at)
    return found


def _outside_hours(schedule: ScheduleEntry, location: LocationEntry, at: Path) -> Found:
    found: Found = []
    days = list(dict.fromkeys(schedule.days))
    for number, (starts, ends) in enumerate(schedule.blocks):
        if ends <= starts:
            continue
        outside = []
        for day in days:
            hours = location.opening_hours.on(day)
            if hours is None:
                outside.append(f"{day} (closed)")
            elif starts < hours[0] or ends > hours[1]:
                outside.append(f"{day} (open {_span(*hours)})")
        if outside:
            found.append(((*at, "blocks", number),
                          (f"the block {_span(starts, ends)} is outside {location.name}'s "
                          f"opening hours on {', '.join(outside)}")))
    return found


def _overlaps(sections: Sections, line_of: LineOf) -> Found:
    """Blocks of one practitioner on one weekday that overlap, at any location, in
    periods (valid_from..valid_until) that overlap."""
    by_day: dict[tuple[str, str], list[tuple[int, int, time, time, ScheduleEntry]]] = {}
    for index, schedule in sections.schedules:
        for day in dict.fromkeys(schedule.days):
            for number, (starts, ends) in enumerate(schedule.blocks):
                if starts < ends:
                    by_day.setdefault((schedule.practitioner, day), []).append(
                        (index, number, starts, ends, schedule))
    clashes: dict[tuple[int, int, int, int], list[str]] = {}
    for (_, day), blocks in by_day.items():
        for later, (i2, b2, s2, e2, two) in enumerate(blocks):
            for i1, b1, s1, e1, one in blocks[:later]:
                if s1 < e2 and s2 < e1 and _periods_meet(one, two):
                    clashes.setdefault((i1, b1, i2, b2), []).append(day)
    found: Found = []
    for (i1, b1, i2, b2), days in clashes.items():
        one, two = _schedule(sections, i1), _schedule(sections, i2)
        other = _where(line_of, ("schedules", i1, "blocks", b1))
        ordered = sorted(days, key=WEEKDAYS.index)
        found.append((("schedules", i2, "blocks", b2),
                      (f"{two.practitioner}'s block {_span(*two.blocks[b2])} at {two.location} "
                      f"overlaps their block {_span(*one.blocks[b1])} at {one.location} "
                      f"({other}) on {', '.join(ordered)}")))
    return found


def _closures(sections: Sections) -> Found:
    found: Found = []
    for index, closure in sections.closures:
        if closure.location is not None:
            found += _reference(sections, "locations", closure.location,
                                ("closures", index, "location"))
        if closure.to is not None and closure.to < closure.from_:
            found.append((("closures", index, "to"),
                          (f"the closure ends on {closure.to}, before it starts on "
                          f"{closure.from_}")))
    return found


def _reference(sections: Sections, section: str, name: str, path: Path) -> Found:
    known = sections.known.get(section, set())
    if name in known:
        return []
    return [(path, f"unknown {_ITEM[section]} '{name}'{_guess(name, known)}")]


def _periods_meet(one: ScheduleEntry, two: ScheduleEntry) -> bool:
    first = (one.valid_from or date.min, one.valid_until or date.max)
    second = (two.valid_from or date.min, two.valid_until or date.max)
    return first[0] <= second[1] and second[0] <= first[1]


def _schedule(sections: Sections, index: int) -> ScheduleEntry:
    return next(entry for i, entry in sections.schedules if i == index)


def _where(line_of: LineOf, path: Path) -> str:
    line = line_of(path)
    return f"line {line}" if line is not None else render_path(path)


def _guess(name: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """": did you mean 'X'?" for the closest choice, if one is close enough."""
    by_fold = {choice.casefold(): choice for choice in choices}
    match = difflib.get_close_matches(name.casefold(), list(by_fold), n=1, cutoff=cutoff)
    return f": did you mean '{by_fold[match[0]]}'?" if match else ""


def _span(starts: time, ends: time) -> str:
    return f"{_hhmm(starts)}–{_hhmm(ends)}"


def _hhmm(moment: time) -> str:
    return moment.strftime("%H:%M")


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def _zone_exists(name: str) -> bool:
    if name in _zones():
        return True
    try:
        ZoneInfo(name)
    except Exception:  # noqa: BLE001 (unknown, malformed or a folder: not a timezone)
        return False
    return True
