"""What the deterministic engine understands in a caller's words, as plain functions.

Yes/no answers (services/affirmation), which offered slot they chose, names, dates
of birth, preferred days and parts of the day, and which appointment type they mean.
Speech recognisers write numbers as words ("march fourteenth nineteen forty eight"),
so spoken numbers are turned into digits before dates are parsed (with `dateparser`,
English only, which keeps a parse well under a millisecond).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime, timedelta

import dateparser

from db.scheduling import AppointmentType
from services.phrases import normalize, phrase_pattern
from services.slots import PART_OF_DAY, Slot

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
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_DATE_SETTINGS_PAST = {"PREFER_DATES_FROM": "past", "DATE_ORDER": "MDY",
                       "REQUIRE_PARTS": ["day", "month", "year"]}


def spoken_numbers_to_digits(text: str) -> str:
    """'march fourteenth nineteen forty eight' → 'march 14 1948'; digits pass through."""
    words = re.sub(r"[,.;:!?]", " ", normalize(text)).replace("-", " ").split()
    out: list[str] = []
    i = 0
    while i < len(words):
        value, used = _number_at(words, i)
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


_MONTH = "(?:" + "|".join(_MONTHS) + ")"
_FULL_DATE = re.compile(
    rf"\b(?:{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH},? \d{{4}}"
    r"|\d{1,2}[/.\-]\d{1,2}[/.\-]\d{2,4})\b"
)


def date_of_birth(text: str, today: date) -> date | None:
    """A full date (day, month and year) in the past, or None."""
    match = _FULL_DATE.search(spoken_numbers_to_digits(text))
    if match is None:
        return None
    parsed = dateparser.parse(
        match.group(0), languages=["en"],
        settings={**_DATE_SETTINGS_PAST, "RELATIVE_BASE": _midnight(today)},
    )
    if parsed is None or parsed.date() >= today or parsed.year < today.year - 120:
        return None
    return parsed.date()


_DAY_PHRASE = re.compile(
    r"\b(today|tomorrow|day after tomorrow|next week|this week|"
    r"(?:next |this )?(?:" + "|".join(_WEEKDAYS) + r")|"
    rf"{_MONTH} \d{{1,2}}|\d{{1,2}}(?:st|nd|rd|th)? of {_MONTH})\b"
)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())


def preferred_days(text: str, today: date) -> tuple[date, date] | None:
    """The days the caller asked for ('next Tuesday', 'this week', 'December 3'), or None."""
    spoken = spoken_numbers_to_digits(text)
    match = _DAY_PHRASE.search(spoken)
    if match is None:
        return None
    phrase = match.group(1)
    if phrase == "next week":
        start = today + timedelta(days=7 - today.weekday())
        return start, start + timedelta(days=6)
    if phrase == "this week":
        return today, today + timedelta(days=6 - today.weekday())
    parsed = dateparser.parse(
        phrase.removeprefix("this "), languages=["en"],
        settings={"PREFER_DATES_FROM": "future", "RELATIVE_BASE": _midnight(today)},
    )
    if parsed is None:
        return None
    day = parsed.date()
    if day < today:
        return None
    return day, day


_FLEXIBLE = phrase_pattern([
    "whenever", "soonest", "earliest", "any time", "anytime", "first available",
    "doesn't matter", "does not matter", "as soon as possible", "asap", "any day",
    "next available",
])
FLEXIBLE_DAYS = 14


def flexible_days(text: str, today: date) -> tuple[date, date] | None:
    """'Whenever is soonest' → the next two weeks, earliest first."""
    if _FLEXIBLE.search(normalize(text)) is None:
        return None
    return today, today + timedelta(days=FLEXIBLE_DAYS - 1)


def part_of_day(text: str) -> str | None:
    words = normalize(text)
    return next((part for part in PART_OF_DAY if part in words), None)


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


_FILLERS = phrase_pattern([
    "my name is", "my name's", "name is", "it's", "it is", "this is", "i'm", "i am", "yes",
    "yeah", "sure", "um", "uh", "okay", "ok", "so", "hi", "hello", "the", "first name",
    "last name", "surname", "is", "and", "spelled", "please", "thanks", "thank you", "it's me",
])
_NAME_WORD = re.compile(r"^[a-z][a-z'\-]{1,30}$")


def name_words(text: str) -> list[str]:
    """The words of a name the caller gave ('my name is sam nair' → ['Sam', 'Nair'])."""
    remainder = _FILLERS.sub(" ", normalize(text).replace(",", " ").replace(".", " "))
    words = [w for w in remainder.split() if _NAME_WORD.match(w)]
    return [_capitalized(w) for w in words[:3]]


def _capitalized(word: str) -> str:
    """'okafor-nair' → 'Okafor-Nair', "o'brien" → "O'Brien"."""
    return re.sub(r"(^|[-'])([a-z])", lambda m: m.group(1) + m.group(2).upper(), word)


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
    words = normalize(text).replace(",", " ").replace(".", " ").split()
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
    for ref, slot in offered:
        if _WEEKDAYS[slot.starts_at.weekday()] in words:
            return ref
        surname = slot.practitioner_name.split()[-1].lower()
        if surname in words:
            return ref
    return None
