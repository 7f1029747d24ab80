"""What the deterministic engine understands in a caller's words, as plain functions.

Spoken numbers, full dates (of birth), which offered slot they chose and which
appointment type they mean. Speech recognisers write numbers as words ("march
fourteenth nineteen forty eight"), so spoken numbers are turned into digits before
dates are read. Who the caller is: language/caller_identity; when they want to come in:
language/time_preferences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from db.scheduling import AppointmentType
from db.slots import Slot
from language.phrases import normalize, phrase_pattern

_UNITS = {
    "zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
    "fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
    "nineteenth": 19, "twentieth": 20, "thirtieth": 30,
}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")


def spoken_numbers_to_digits(text: str, *, years: bool = True) -> str:
    """'march fourteenth nineteen forty eight' → 'march 14 1948'; digits pass through.
    Without `years`, pairs are not read as years ('eleven twenty' → '11 20', not '1120')."""
    words = re.sub(r"[,.;:!?]", " ", normalize(text)).replace("-", " ").split()
    out: list[str] = []
    i = 0
    while i < len(words):
        value, used = _number_at(words, i) if years else _small(words, i)
        if used:
            out.append(str(value))
            i += used
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def _small(words: list[str], i: int) -> tuple[int, int]:
    """A number below 100 at words[i] (cardinal or ordinal): (value, words used)."""
    word = words[i] if i < len(words) else ""
    if word in _TENS:
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if nxt in _UNITS and 0 < _UNITS[nxt] < 10:
            return _TENS[word] + _UNITS[nxt], 2
        if nxt in _ORDINALS and _ORDINALS[nxt] < 10:
            return _TENS[word] + _ORDINALS[nxt], 2
        return _TENS[word], 1
    if word in _UNITS:
        return _UNITS[word], 1
    if word in _ORDINALS:
        return _ORDINALS[word], 1
    return 0, 0


def _number_at(words: list[str], i: int) -> tuple[int, int]:
    word = words[i]
    if word == "two" and i + 1 < len(words) and words[i + 1] == "thousand":
        rest = i + 2 + (1 if i + 2 < len(words) and words[i + 2] == "and" else 0)
        value, used = _small(words, rest)
        return 2000 + value, (rest - i) + used
    first, used = _small(words, i)
    if not used:
        return 0, 0
    # "nineteen forty eight", "twenty twenty six": two pairs make a year
    if 10 <= first <= 20 and words[i] in _UNITS | _TENS:
        second, used_second = _small(words, i + used)
        if used_second and 10 <= second <= 99:
            return first * 100 + second, used + used_second
        if i + used < len(words) and words[i + used] == "oh":
            third, used_third = _small(words, i + used + 1)
            if used_third and third < 10:
                return first * 100 + third, used + 1 + used_third
    return first, used


_MONTH = "(?:" + "|".join(MONTHS) + ")"
_YEAR = r"(\d{4}|\d{2})"
_DAY = r"(?:the )?(\d{1,2})(?:st|nd|rd|th)?"
# Full dates as callers say them (after spoken numbers became digits): named months in
# either order, digits with separators, and (when a date is expected) bare numbers.
_NAMED_MONTH_FIRST = re.compile(rf"\b({_MONTH}),? {_DAY},? (?:of )?{_YEAR}\b")
_NAMED_DAY_FIRST = re.compile(rf"\b{_DAY} (?:of )?({_MONTH}),? {_YEAR}\b")
_NUMERIC = re.compile(r"\b(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{4}|\d{2})\b")
_BARE = re.compile(r"(?<!\d )\b(\d{1,2}) (\d{1,2}) (\d{4}|\d{2})\b(?! \d)")


def date_of_birth(text: str, today: date, *, bare: bool = False) -> date | None:
    """A full date in the past, as a date of birth: "March 14 1948", "the ninth of July
    seventy-two", "7/9/72"; with `bare` (a date was asked for) also "seven nine seventy two".
    Month first, as North American callers say it; a two-digit year is the latest past one."""
    readings = [spoken_numbers_to_digits(text)]
    if bare:  # "eleven twenty seventy eight" is month, day, year, not the year 1120
        readings.append(spoken_numbers_to_digits(text, years=False))
    candidates: list[tuple[int, int, int]] = []
    for reading in readings:
        candidates += _full_dates(re.sub(r"\b0 (\d)\b", r"0\1", reading), today, bare)
    for month, day, year in candidates:
        try:
            born = date(year, month, day)
        except ValueError:
            continue
        if today.year - 120 <= born.year and born < today:
            return born
    return None


def _full_dates(spoken: str, today: date, bare: bool) -> list[tuple[int, int, int]]:
    """(month, day, year) of each full date in digits ("oh seven" already "07")."""
    candidates: list[tuple[int, int, int]] = []
    for match in _NAMED_MONTH_FIRST.finditer(spoken):
        candidates.append((MONTHS.index(match.group(1)) + 1, int(match.group(2)),
                           full_year(match.group(3), today)))
    for match in _NAMED_DAY_FIRST.finditer(spoken):
        candidates.append((MONTHS.index(match.group(2)) + 1, int(match.group(1)),
                           full_year(match.group(3), today)))
    for pattern in [_NUMERIC] + ([_BARE] if bare else []):
        for match in pattern.finditer(spoken):
            first, second = int(match.group(1)), int(match.group(2))
            month, day = (second, first) if first > 12 >= second else (first, second)
            candidates.append((month, day, full_year(match.group(3), today)))
    return candidates


def full_year(digits: str, today: date) -> int:
    """'72' → 1972, '05' → 2005: the latest year ending so that is not in the future."""
    if len(digits) == 4:
        return int(digits)
    year = 2000 + int(digits)
    return year if year < today.year else year - 100


def appointment_type(text: str, types: Sequence[AppointmentType]) -> AppointmentType | None:
    """The type whose name or keywords the caller used (the most specific mention wins)."""
    spoken = normalize(text)
    best: tuple[int, AppointmentType] | None = None
    for kind in types:
        for phrase in (kind.name, *kind.keywords):
            match = phrase_pattern([phrase]).search(spoken)
            if match and (best is None or len(phrase) > best[0]):
                best = (len(phrase), kind)
    return best[1] if best else None


_TITLES = frozenset({"dr", "dr.", "doctor", "nurse", "mr", "mrs", "ms", "miss"})


def named(text: str, names: Sequence[str]) -> str | None:
    """The name from `names` the caller mentions, by any of its words ('with Dr Patel',
    'can I see Aisha'), or None; a word two names share says neither."""
    spoken = normalize(text)
    found: set[str] = set()
    for name in names:
        words = [w for w in normalize(name).split() if w not in _TITLES and len(w) >= 3]
        if words and phrase_pattern(words).search(spoken):
            found.add(name)
    full = [n for n in found if phrase_pattern([n]).search(spoken)]
    return (full or sorted(found))[0] if len(full) == 1 or len(found) == 1 else None


_ORDINAL_CHOICE = {
    "first": 0, "1st": 0, "earlier": 0, "earliest": 0, "either": 0, "any": 0,
    "second": 1, "2nd": 1, "later": 1, "other": 1, "third": 2, "3rd": 2, "last": -1,
}
_TIME = re.compile(r"(\bat )?\b(\d{1,2})(?:[: ](\d{2}))? ?(am|pm|a m|p m|o'clock)?\b")


_CHOICE_NOUNS = {"one", "option", "slot", "time", "appointment", "please"}
SHORT_ANSWER_WORDS = 3


def _chooses(words: list[str], word: str) -> bool:
    """`word` names one of the offered slots: "the first one", "first please", "Later."
    — not "I'll check my diary first" or "call me back later"."""
    for i, w in enumerate(words):
        if w != word:
            continue
        if len(words) <= SHORT_ANSWER_WORDS:
            return True
        if (i > 0 and words[i - 1] in ("the", "that")) or (
                i + 1 < len(words) and words[i + 1] in _CHOICE_NOUNS):
            return True
    return False


def slot_choice(text: str, offered: Sequence[tuple[str, Slot]]) -> str | None:
    """Which of the slots just read out the caller chose, by order, time, day or name."""
    if not offered:
        return None
    words = re.sub(r"'s\b", "", normalize(text)).replace(",", " ").replace(".", " ").split()
    for word, index in _ORDINAL_CHOICE.items():
        if index < len(offered) and _chooses(words, word):
            return offered[index][0]
    spoken = spoken_numbers_to_digits(text)
    for match in _TIME.finditer(spoken):
        at, hour, minute = match.group(1), int(match.group(2)), int(match.group(3) or 0)
        suffix = match.group(4)
        if not (at or match.group(3) or suffix) or not 1 <= hour <= 23:
            continue  # a bare number ("that one") is not a time
        meridiem = (suffix or "").replace(" ", "").replace("o'clock", "")
        for ref, slot in offered:
            local = slot.starts_at
            if local.minute != minute and match.group(3):
                continue
            if local.minute != minute and not match.group(3) and local.minute != 0:
                continue
            twelve = local.hour % 12 or 12
            if hour in (local.hour, twelve) and (
                not meridiem or (meridiem == "pm") == (local.hour >= 12)
            ):
                return ref
    for said_of in (lambda s: WEEKDAYS[s.starts_at.weekday()],
                    lambda s: s.practitioner_name.split()[-1].lower()):
        named_ones = [ref for ref, slot in offered if said_of(slot) in words]
        if len(named_ones) == 1:  # "the Friday one" says which only if one is on Friday
            return named_ones[0]
    return None
