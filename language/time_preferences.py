"""When the caller wants to come in, as they say it: days, vague stretches, parts of the day.

"Next Tuesday", "whenever's quickest", "end of the week", "after work", "not Mondays",
"not Tuesday, Thursday". Plain functions over the words (phrases in
`data/time_words.yaml`, validated at load); a day said after a negation is one the
caller cannot do, and of the days they can, the last one said wins (a correction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args

import dateparser
import yaml
from pydantic import BaseModel, ConfigDict, Field

from db.slots import PART_OF_DAY
from language.phrases import normalize, phrase_pattern
from language.understanding import MONTHS, WEEKDAYS, spoken_numbers_to_digits

WORDS_FILE = Path(__file__).parent / "data" / "time_words.yaml"
FLEXIBLE_DAYS = 14
RangeName = Literal["end_of_week", "end_of_next_week", "start_of_next_week", "weekend",
                    "next_month", "in_two_weeks"]
PartOfDay = Literal["morning", "afternoon", "evening"]
Days = tuple[date, date]


class TimeWords(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    flexible: list[str] = Field(min_length=1)
    ranges: dict[RangeName, list[str]]
    parts_of_day: dict[PartOfDay, list[str]]
    not_parts_of_day: list[str]
    negations: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class TimePatterns:
    flexible: re.Pattern[str]
    ranges: dict[str, re.Pattern[str]]
    parts_of_day: dict[str, re.Pattern[str]]
    not_parts_of_day: re.Pattern[str]
    negated_before: re.Pattern[str]


@lru_cache(maxsize=1)
def time_patterns(path: Path = WORDS_FILE) -> TimePatterns:
    words = TimeWords.model_validate(yaml.safe_load(path.read_text()))
    missing = set(get_args(RangeName)) - set(words.ranges)
    missing |= set(PART_OF_DAY) - set(words.parts_of_day)
    if missing:
        raise ValueError(f"time words: no phrases for {sorted(missing)}")
    negations = "|".join(re.escape(n) for n in sorted(words.negations, key=len, reverse=True))
    return TimePatterns(
        flexible=phrase_pattern(words.flexible),
        ranges={name: phrase_pattern(p) for name, p in words.ranges.items()},
        parts_of_day={name: phrase_pattern(p) for name, p in words.parts_of_day.items()},
        not_parts_of_day=phrase_pattern(words.not_parts_of_day),
        negated_before=re.compile(rf"(?:^|\W)(?:{negations})(?: (?:on|in|at|a|the))*\W*$"),
    )


_DAY_PHRASE = re.compile(
    r"\b(today|tomorrow|day after tomorrow|next week|this week|"
    r"(?:next |this )?(?:" + "|".join(WEEKDAYS) + r")|"
    rf"(?:{'|'.join(MONTHS)}) \d{{1,2}}|\d{{1,2}}(?:st|nd|rd|th)? of (?:{'|'.join(MONTHS)}))"
    r"(?!\w)(?! \d{2,4}\b)"  # not part of a full date with a year (a birth date)
)
_WEEKDAY_WORD = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")s?\b")


def _negated(spoken: str, start: int) -> bool:
    """A negation right before `start` ("not", "can't do", "any day but")."""
    return time_patterns().negated_before.search(spoken[max(0, start - 24):start]) is not None


def preferred_days(text: str, today: date) -> Days | None:
    """The days the caller asked for ('next Tuesday', 'end of the week', 'not Tuesday,
    Thursday'), or None. Of the days not negated, the last one said wins."""
    spoken = spoken_numbers_to_digits(text)
    said: list[tuple[int, int, Days | None]] = [
        (m.start(), m.end(),
         None if _negated(spoken, m.start()) else _phrase_days(m.group(1), today))
        for m in _DAY_PHRASE.finditer(spoken)
    ]
    said += [(m.start(), m.end(), range_days(name, today))
             for name, pattern in time_patterns().ranges.items() for m in pattern.finditer(spoken)]
    whole = [(start, days) for start, end, days in said if days is not None and not any(
        (s, e) != (start, end) and s <= start and end <= e for s, e, _ in said)]
    return max(whole, key=lambda found: found[0])[1] if whole else None


def _phrase_days(phrase: str, today: date) -> Days | None:
    if phrase == "next week":
        start = today + timedelta(days=7 - today.weekday())
        return start, start + timedelta(days=6)
    if phrase == "this week":
        return today, today + timedelta(days=6 - today.weekday())
    parsed = dateparser.parse(
        phrase.removeprefix("this "), languages=["en"],
        settings={"PREFER_DATES_FROM": "future",
                  "RELATIVE_BASE": datetime.combine(today, datetime.min.time())},
    )
    if parsed is None or parsed.date() < today:
        return None
    return parsed.date(), parsed.date()


def range_days(name: str, today: date) -> Days:
    """A vague stretch of days from today ('end of the week': Thursday to Saturday)."""
    monday = today - timedelta(days=today.weekday())
    if name == "next_month":
        first = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
        return first, (first + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    if name == "in_two_weeks":
        return today + timedelta(days=14), today + timedelta(days=20)
    offsets = {"end_of_week": (3, 5), "end_of_next_week": (10, 12),
               "start_of_next_week": (7, 8), "weekend": (5, 6)}[name]
    start, end = (monday + timedelta(days=d) for d in offsets)
    if end < today:  # already past this week's: the next one
        start, end = start + timedelta(days=7), end + timedelta(days=7)
    return max(start, today), end


def flexible_days(text: str, today: date) -> Days | None:
    """'Whenever's quickest' → the next two weeks, earliest first."""
    if time_patterns().flexible.search(normalize(text)) is None:
        return None
    return today, today + timedelta(days=FLEXIBLE_DAYS - 1)


def part_of_day(text: str) -> str | None:
    """'after work' → evening; 'good morning' is a greeting, not a preference."""
    patterns = time_patterns()
    words = patterns.not_parts_of_day.sub(" ", normalize(text))
    found = [(m.start(), part) for part, pattern in patterns.parts_of_day.items()
             for m in pattern.finditer(words) if not _negated(words, m.start())]
    return max(found)[1] if found else None


def excluded_weekdays(text: str) -> frozenset[int]:
    """Weekdays the caller cannot do ('not Mondays', 'any day but Friday'): 0 = Monday."""
    spoken = normalize(text)
    return frozenset(WEEKDAYS.index(m.group(1)) for m in _WEEKDAY_WORD.finditer(spoken)
                     if _negated(spoken, m.start()))


def warm_up() -> None:
    """Compile the phrases and load the date parser now, not on a caller's turn."""
    time_patterns()
    preferred_days("next tuesday", date(2000, 1, 1))

