"""Structured fields as callers say them and as records keep them.

One place normalises phone numbers, emails, member ids, names and dates, for every
reader: the write tools (natural field names, flexible date formats), extraction,
the per-event judge (which auto-corrects formatting) and audio verification. Each
function returns the canonical form, or None when the text does not hold one.
"""

from __future__ import annotations

import re
from datetime import date, datetime

import dateparser

from language.understanding import date_of_birth as spoken_date_of_birth
from language.understanding import spoken_numbers_to_digits

MAX_AGE_YEARS = 120
_EMAIL = re.compile(r"^[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}$")
_SPOKEN_EMAIL = (("at", "@"), ("dot", "."), ("underscore", "_"), ("dash", "-"),
                 ("hyphen", "-"))
_DATE_SETTINGS = {"PREFER_DATES_FROM": "past", "DATE_ORDER": "MDY",
                  "REQUIRE_PARTS": ["day", "month", "year"]}


def digits_in(text: str) -> str:
    """Every digit the text holds, spoken ones too ("five five five" → "555")."""
    return re.sub(r"\D", "", spoken_numbers_to_digits(text.replace("-", " ")))


def normalize_phone(text: str | None, *, country_code: str = "1") -> str | None:
    """E.164: ten national digits (North American numbering by default), or +digits."""
    if not text:
        return None
    stripped = text.strip()
    digits = digits_in(stripped)
    if stripped.startswith("+") and 8 <= len(digits) <= 15:
        return f"+{digits}"
    if country_code == "1":
        if len(digits) == 10 and digits[0] not in "01":
            return f"+1{digits}"
        if len(digits) == 11 and digits[0] == "1" and digits[1] not in "01":
            return f"+{digits}"
    return None


def is_e164(value: str | None) -> bool:
    return bool(value) and re.fullmatch(r"\+[1-9]\d{7,14}", value or "") is not None


def normalize_email(text: str | None) -> str | None:
    """'jane dot doe at example dot com' → 'jane.doe@example.com'."""
    if not text:
        return None
    words = text.strip().lower().split()
    spoken = dict(_SPOKEN_EMAIL)
    joined = "".join(spoken.get(w, w) for w in words) if len(words) > 1 else text.lower()
    joined = joined.strip(" .,;")
    return joined if _EMAIL.match(joined) else None


def normalize_member_id(text: str | None) -> str | None:
    """Upper-case letters and digits, 5 to 20 of them, at least one digit
    ('w one two three four five six' → 'W123456')."""
    if not text:
        return None
    value = re.sub(r"[^A-Za-z0-9]", "", spoken_numbers_to_digits(text)).upper()
    if 5 <= len(value) <= 20 and any(c.isdigit() for c in value):
        return value
    return None


def normalize_name(text: str | None) -> str | None:
    """'o'brien' → "O'Brien", 'mary-jane' → 'Mary-Jane'; None when not a name."""
    if not text:
        return None
    cleaned = " ".join(text.strip().split())
    if not re.fullmatch(r"[A-Za-zÀ-ÿ' \-]{1,60}", cleaned):
        return None
    return re.sub(r"[A-Za-zÀ-ÿ]+", _cased, cleaned)


def _cased(match: re.Match[str]) -> str:
    """A word as a name: capitalised, unless already written with inner capitals as the
    person writes it (McDonald, DeShawn)."""
    word = match.group(0)
    if word[1:] != word[1:].lower() and word != word.upper():
        return word
    return word.capitalize()


def parse_date(value: object, today: date) -> date | None:
    """A full past date in any usual form: ISO, 03/14/1948, 'March 14th 1948', spoken."""
    if value is None:
        return None
    if isinstance(value, date):
        return value
    text = str(value).strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    spoken = spoken_date_of_birth(text, today)
    if spoken is not None:
        return spoken
    if not re.search(r"\b\d{4}\b|\b\d{1,2}[/.\-]\d{1,2}[/.\-]\d{2,4}\b",
                     spoken_numbers_to_digits(text)):
        return None  # no year: "yesterday", "the fifth" are not a full date
    parsed = dateparser.parse(text, languages=["en"], settings={
        **_DATE_SETTINGS, "RELATIVE_BASE": datetime.combine(today, datetime.min.time())})
    return parsed.date() if parsed is not None else None


def plausible_birth_date(value: date | None, today: date) -> bool:
    if value is None:
        return False
    oldest = date(today.year - MAX_AGE_YEARS, today.month, min(today.day, 28))
    return oldest <= value < today
