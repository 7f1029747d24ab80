"""What the clinic's calendar tells a caller: open now or not, the next opening, the
hours on a day, where a location is, and the closures coming up.

Plain functions over what the call already loaded (the clinic's locations and closures)
and a moment: no I/O. The words are data (`prompts/calendar.yaml`). The same answers
serve the offline engine (its `answer_hours` action), the LLM (the `GetLocationInfo`
tool and the ambient context) and the greeting of a caller who rings while the clinic is
closed. Times are read in each location's own timezone (db/opening.py).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from db.opening import (
    SEARCH_DAYS,
    UPCOMING_DAYS,
    Closure,
    blocks_on,
    closure_on,
    is_open,
    status,
    upcoming_closures,
    weekly_blocks,
)
from db.scheduling import Location, dialled_location
from language.phrases import normalize, phrase_pattern
from language.spoken import say_clock, say_day, say_days, say_hours, say_list, say_opening
from language.time_preferences import preferred_days
from language.understanding import MONTHS, WEEKDAYS, named, spoken_numbers_to_digits
from lib.prompts import PROMPTS_DIR

LINES_FILE = PROMPTS_DIR / "calendar.yaml"
AFTER_HOURS = frozenset({"clinic", "location", "clinic_unknown", "location_unknown"})
ANSWERS = frozenset({
    "week", "place_week", "open_now", "place_open_now", "closed_now", "place_closed_now",
    "closed_now_unknown", "place_closed_now_unknown", "day_open", "place_day_open",
    "day_closed", "place_day_closed", "address", "closures_ahead", "clinic_closure",
    "place_closure", "week_at", "day_at", "until",
})
FIELDS = frozenset({
    "place", "address", "hours", "blocks", "closes", "on_day", "places", "next_opening",
    "dates", "closures", "for_reason", "emergency_number", "reason",
})


class CalendarLines(BaseModel):
    after_hours: dict[str, str]
    answers: dict[str, str]
    for_reason: str

    @model_validator(mode="after")
    def _complete_and_known(self) -> CalendarLines:
        problems = []
        if set(self.after_hours) != AFTER_HOURS:
            problems.append(f"after_hours must be exactly {sorted(AFTER_HOURS)}")
        if set(self.answers) != ANSWERS:
            problems.append(f"answers must be exactly {sorted(ANSWERS)}")
        lines = {**self.after_hours, **self.answers, "for_reason": self.for_reason}
        for name, line in lines.items():
            used = {field for _, field, _, _ in string.Formatter().parse(line) if field}
            if used - FIELDS:
                problems.append(f"{name}: unknown fields {sorted(used - FIELDS)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


@lru_cache(maxsize=1)
def calendar_lines(path: Path = LINES_FILE) -> CalendarLines:
    return CalendarLines.model_validate(yaml.safe_load(path.read_text()))


def _answer(name: str, **fields: str) -> str:
    return calendar_lines().answers[name].format(**fields)


def _for(closure: Closure | None) -> str:
    return calendar_lines().for_reason.format(reason=closure.reason) if closure else ""


def _zone(locations: Sequence[Location]) -> ZoneInfo:
    return ZoneInfo(locations[0].timezone) if locations else ZoneInfo("UTC")


def clinic_zone(locations: Sequence[Location], dialled: str | None = None) -> ZoneInfo:
    """The clinic's own timezone: the dialled location's, else its first location's (UTC
    with none), never the server's."""
    place = dialled_location(locations, dialled)
    return ZoneInfo(place.timezone) if place else _zone(locations)


def clinic_today(locations: Sequence[Location], now: datetime,
                 dialled: str | None = None) -> date:
    """The clinic's own date at `now` (in `clinic_zone`), against which "today" and
    "tomorrow" are read."""
    return now.astimezone(clinic_zone(locations, dialled)).date()


# --- Understanding the question --------------------------------------------------------

WORDS_FILE = Path(__file__).parent / "data" / "calendar_words.yaml"


class CalendarWords(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    now: list[str] = Field(min_length=1)
    where: list[str] = Field(min_length=1)
    street_kinds: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class _Patterns:
    now: re.Pattern[str]
    where: re.Pattern[str]
    street_kinds: tuple[str, ...]


@lru_cache(maxsize=1)
def _patterns(path: Path = WORDS_FILE) -> _Patterns:
    words = CalendarWords.model_validate(yaml.safe_load(path.read_text()))
    return _Patterns(phrase_pattern(words.now), phrase_pattern(words.where),
                     tuple(words.street_kinds))


# "the 24th", "the twenty fourth", "the first": a day of the month said alone (not "the
# 24th of December", which names its month, nor "the first one", which is a choice)
_DAY_OF_MONTH = re.compile(
    r"\bthe (\d{1,2}(?:st|nd|rd|th)|(?:(?:twenty|thirty) )?(?:first|second|third|[a-z]+th))\b"
    r"(?! (?:of )?(?:" + "|".join(MONTHS) + r")\b)(?! (?:one|ones|location|clinic|office)\b)")
_WEEKDAYS_PLURAL = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")s\b")


@dataclass(frozen=True)
class CalendarQuestion:
    """What a caller asked about the calendar, as understood from their words."""

    place: Location | None = None  # the location they named (None: the clinic)
    day: date | None = None  # a day they asked about
    weekday: int | None = None  # "on Saturdays": the weekday in general (0 = Monday)
    now: bool = False  # open right now?
    where: bool = False  # the address


def place_named(text: str, locations: Sequence[Location]) -> Location | None:
    """The location the caller names, by its name ('Northside', 'the north side clinic',
    'your downtown office') or its street ('the Lake Avenue clinic'); None if none or
    several."""
    spoken = re.sub(r"'s\b", "", normalize(text))  # "Northside's hours"
    by_name = named(spoken, [loc.name for loc in locations])
    found = {loc.name for loc in locations if loc.name == by_name}
    words = spoken.split()
    joined = {a + b for a, b in pairwise(words)}
    for loc in locations:
        if normalize(loc.name).replace(" ", "") in joined:
            found.add(loc.name)
        street = _street(loc.address)
        if street and re.search(street, spoken):
            found.add(loc.name)
    return next((loc for loc in locations if loc.name in found), None) if len(found) == 1 \
        else None


def _street(address: str) -> str | None:
    """A pattern for the street an address is on ('45 Lake Avenue' → 'lake avenue', 'lake
    ave'); None when it has no street name to go by."""
    kinds = _patterns().street_kinds
    words = [w for w in normalize(address.split(",")[0]).split() if not w[0].isdigit()]
    if len(words) >= 2 and words[-1] in kinds:
        stem = r"\s+".join(re.escape(w) for w in words[:-1])
        return rf"\b{stem}\s+(?:{'|'.join(map(re.escape, kinds))})\b"
    if words and len(" ".join(words)) >= 6:
        return r"\b" + r"\s+".join(re.escape(w) for w in words) + r"\b"
    return None


def understand(text: str, locations: Sequence[Location], closures: Sequence[Closure],
               now: datetime) -> CalendarQuestion:
    """The place, day, 'now' and 'where' in a caller's question about the calendar."""
    place = place_named(text, locations)
    today = now.astimezone(ZoneInfo(place.timezone) if place else _zone(locations)).date()
    words = normalize(text).replace("-", " ")
    spoken = spoken_numbers_to_digits(words)
    plural = _WEEKDAYS_PLURAL.search(spoken)
    return CalendarQuestion(
        place=place,
        day=None if plural else _day_asked(words, closures, today),
        weekday=WEEKDAYS.index(plural.group(1)) if plural else None,
        now=_patterns().now.search(spoken) is not None,
        where=_patterns().where.search(spoken) is not None,
    )


def _day_asked(words: str, closures: Sequence[Closure], today: date) -> date | None:
    """A closure by its reason ('are you open on Christmas Eve?'), which comes first: it
    is the day the caller means; else 'the 24th' (the next such date), 'on Saturday',
    'tomorrow', 'December 24'."""
    for closure in closures:
        reason = normalize(closure.reason)
        if (closure.ends_on >= today and len(reason) >= 4
                and phrase_pattern([reason]).search(words)):
            return max(closure.starts_on, today)
    for said in _DAY_OF_MONTH.finditer(words):
        number = spoken_numbers_to_digits(said.group(1)).rstrip("stndrh")
        if number.isdigit() and 1 <= int(number) <= 31:
            return _next_day_of_month(int(number), today)
    spoken = spoken_numbers_to_digits(words)
    days = preferred_days(spoken, today)
    if days is not None and days[0] == days[1]:
        return days[0]
    if re.search(r"\btoday\b", spoken):
        return today
    return None


def _next_day_of_month(number: int, today: date) -> date | None:
    year, month = today.year, today.month
    for _ in range(13):
        try:
            day = date(year, month, number)
        except ValueError:  # the 31st of a 30-day month: the next month that has one
            day = None
        if day is not None and day >= today:
            return day
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return None


# --- Answering it ------------------------------------------------------------------------


def week_hours(locations: Sequence[Location]) -> str:
    """Every location's weekly hours: 'at Downtown Monday to Friday 8 AM to 5 PM and at ...'."""
    return say_list([_answer("week_at", place=loc.name, hours=say_hours(loc.opening_hours))
                     for loc in locations])


def answer(question: CalendarQuestion, locations: Sequence[Location],
           closures: Sequence[Closure], now: datetime) -> str:
    """The spoken answer to a question about hours or addresses, from the clinic's data."""
    places = [question.place] if question.place else list(locations)
    if not places:
        return ""
    parts = []
    if question.where:
        parts += [_answer("address", place=loc.name, address=loc.address) for loc in places]
    if question.now or _done_for_today(question.day, places, closures, now):
        parts.append(_now(question.place, places, closures, now))
    elif question.day is not None:
        parts.append(_on_day(question.place, places, closures, question.day, now))
    elif question.weekday is not None:
        parts.append(_on_weekday(question.place, places, question.weekday))
    elif not question.where:
        parts.append(_answer("place_week", place=question.place.name,
                             hours=say_hours(question.place.opening_hours))
                     if question.place else _answer("week", hours=week_hours(places)))
        ahead = closures_ahead(places, closures, now, all_places=question.place is None)
        if ahead:
            parts.append(ahead)
    return " ".join(parts)


def _done_for_today(day: date | None, places: list[Location], closures: Sequence[Closure],
                    now: datetime) -> bool:
    """Asked about today once today's hours are over: what matters is when it opens next."""
    if day is None or day != now.astimezone(ZoneInfo(places[0].timezone)).date():
        return False
    found = status(places, now, closures)
    return not found.open and (found.next_opening is None
                               or found.next_opening.at.date() != day)


def _now(place: Location | None, places: list[Location], closures: Sequence[Closure],
         now: datetime) -> str:
    found = status(places, now, closures)
    if place is not None:
        if found.open:
            return _answer("place_open_now", place=place.name, closes=say_clock(found.closes[0]))
        if found.next_opening is None:
            return _answer("place_closed_now_unknown", place=place.name,
                           for_reason=_for(found.closure))
        return _answer("place_closed_now", place=place.name, for_reason=_for(found.closure),
                       next_opening=say_opening(found.next_opening.at, now))
    if found.open:
        return _answer("open_now", places=say_list([
            _answer("until", place=p.name, closes=say_clock(end))
            for p, end in zip(found.open_places, found.closes, strict=True)]))
    if found.next_opening is None:
        return _answer("closed_now_unknown", for_reason=_for(found.closure))
    return _answer("closed_now", for_reason=_for(found.closure),
                   next_opening=say_opening(found.next_opening.at, now),
                   place=found.next_opening.place.name)


def _on_day(place: Location | None, places: list[Location], closures: Sequence[Closure],
            day: date, now: datetime) -> str:
    today = now.astimezone(ZoneInfo(places[0].timezone)).date()
    shut = [closure_on(closures, day, p.id) for p in places]
    on_day = _on(day, today, dated=any(shut) or day > today + timedelta(days=6))
    open_at = [(p, blocks) for p in places if (blocks := blocks_on(p, day, closures))]
    if place is not None:
        if not open_at:
            return _answer("place_day_closed", place=place.name, on_day=on_day,
                           for_reason=_for(shut[0]))
        return _answer("place_day_open", place=place.name, on_day=on_day,
                       blocks=_blocks(open_at[0][1]))
    if not open_at:
        return _answer("day_closed", on_day=on_day,
                       for_reason=_for(shut[0] if all(shut) else None))
    return _answer("day_open", on_day=on_day, places=say_list([
        _answer("day_at", place=p.name, blocks=_blocks(blocks)) for p, blocks in open_at]))


def _on_weekday(place: Location | None, places: list[Location], weekday: int) -> str:
    on_day = f"on {WEEKDAYS[weekday].title()}s"
    open_at = [(p, blocks) for p in places if (blocks := weekly_blocks(p.opening_hours, weekday))]
    if place is not None:
        if not open_at:
            return _answer("place_day_closed", place=place.name, on_day=on_day, for_reason="")
        return _answer("place_day_open", place=place.name, on_day=on_day,
                       blocks=_blocks(open_at[0][1]))
    if not open_at:
        return _answer("day_closed", on_day=on_day, for_reason="")
    return _answer("day_open", on_day=on_day, places=say_list([
        _answer("day_at", place=p.name, blocks=_blocks(blocks)) for p, blocks in open_at]))


def _on(day: date, today: date, *, dated: bool) -> str:
    said = say_day(day, today, with_date=dated and day not in (today, today + timedelta(1)))
    return said if said in ("today", "tomorrow") else f"on {said}"


def _blocks(blocks: Sequence[tuple]) -> str:
    return say_list([f"{say_clock(start)} to {say_clock(end)}" for start, end in blocks])


def closures_ahead(places: Sequence[Location], closures: Sequence[Closure], now: datetime,
                   *, all_places: bool = True, days: int = UPCOMING_DAYS) -> str:
    """'Please note that we're closed December 24 to 26 for the holidays.' for the closures
    at these places in the coming days ('' when none)."""
    if not places:
        return ""
    today = now.astimezone(ZoneInfo(places[0].timezone)).date()
    names = {p.id: p.name for p in places}
    said = []
    for closure in upcoming_closures(closures, today, days=days):
        dates, why = say_days(max(closure.starts_on, today), closure.ends_on), _for(closure)
        if closure.location_id is None and all_places:
            said.append(_answer("clinic_closure", dates=dates, for_reason=why))
        elif closure.location_id is None or closure.location_id in names:
            said.append(_answer("place_closure", dates=dates, for_reason=why,
                                place=names.get(closure.location_id or "", places[0].name)))
    return _answer("closures_ahead", closures=say_list(said)) if said else ""


# --- The greeting of a caller who rings while it is closed ------------------------------


@dataclass(frozen=True)
class AfterHours:
    """The clinic (or the dialled location) is closed: what the caller hears, and what
    goes on the call's record."""

    line: str
    place: str | None  # the dialled location's name (None: the clinic)
    next_opening: datetime | None
    reason: str | None

    def event(self) -> dict[str, str | None]:
        return {"place": self.place, "reason": self.reason,
                "next_opening": self.next_opening.isoformat() if self.next_opening else None}


def after_hours(locations: Sequence[Location], closures: Sequence[Closure], now: datetime, *,
                dialled: str | None, emergency_number: str) -> AfterHours | None:
    """What a caller hears at the start when the dialled location (else every location)
    is closed; None while it is open or the clinic has no locations."""
    place = dialled_location(locations, dialled)
    places = [place] if place else list(locations)
    if not places:
        return None
    found = status(places, now, closures)
    if found.open:
        return None
    lines = calendar_lines().after_hours
    opening = found.next_opening
    key = ("location" if place else "clinic") + ("" if opening else "_unknown")
    line = lines[key].format(
        place=place.name if place else "", for_reason=_for(found.closure),
        next_opening=say_opening(opening.at, now) if opening else "",
        emergency_number=emergency_number)
    return AfterHours(line, place.name if place else None, opening.at if opening else None,
                      found.closure.reason if found.closure else None)


def with_after_hours(greeting: str, line: str) -> str:
    """The greeting with the after-hours line before its closing question ('How can I
    help?'), or after it when it ends with no question."""
    greeting = greeting.strip()
    if greeting.endswith("?"):
        cut = max(greeting.rfind(". "), greeting.rfind("! "))
        if cut >= 0:
            return f"{greeting[:cut + 1]} {line} {greeting[cut + 2:]}"
        return f"{line} {greeting}"
    return f"{greeting} {line}"


# --- What the LLM always knows -----------------------------------------------------------


def calendar_context(locations: Sequence[Location], closures: Sequence[Closure],
                     now: datetime, *, dialled: str | None = None) -> str:
    """Open now or not (and until when, or the next opening), and the closures of the
    coming days with their reasons, for the ambient context."""
    place = dialled_location(locations, dialled)
    places = [place] if place else list(locations)
    if not places:
        return ""
    local = now.astimezone(ZoneInfo(places[0].timezone))
    found = status(places, now, closures)
    why = f" ({found.closure.reason})" if found.closure else ""
    if found.open:
        state = "open: " + say_list([f"{p.name} until {say_clock(end)}" for p, end in
                                     zip(found.open_places, found.closes, strict=True)])
    elif found.next_opening is not None:
        state = (f"closed{why}; opens next: {found.next_opening.place.name} "
                 f"{say_opening(found.next_opening.at, now)}")
    else:
        state = f"closed{why}; no opening in the next {SEARCH_DAYS} days"
    text = f"Now ({local:%A} {say_clock(local)} at the clinic): {state}."
    names = {loc.id: loc.name for loc in locations}
    ahead = [f"{say_days(max(c.starts_on, local.date()), c.ends_on)}, "
             f"{names.get(c.location_id or '', 'every location')} ({c.reason})"
             for c in upcoming_closures(closures, local.date())
             if c.location_id is None or c.location_id in names]
    if ahead:
        text += f" Closed in the next {UPCOMING_DAYS} days: " + "; ".join(ahead) + "."
    return text



def open_lines(locations: Sequence[Location], closures: Sequence[Closure],
               now: datetime) -> list[Location]:
    """The locations open at `now` with a number a person answers: where a caller who
    asks for a person can be put through right away."""
    return [loc for loc in locations if loc.phone_number and is_open(loc, now, closures)]
