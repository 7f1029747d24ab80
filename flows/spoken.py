"""How times, prices and lists are said aloud: one place, so tools and templates agree."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime


def say_time(moment: datetime) -> str:
    """'Tuesday, December 1 at 9 AM' / '9:30 AM': the way a receptionist reads a slot."""
    hour = moment.hour % 12 or 12
    minutes = f":{moment.minute:02d}" if moment.minute else ""
    meridiem = "AM" if moment.hour < 12 else "PM"
    return f"{moment:%A}, {moment:%B} {moment.day} at {hour}{minutes} {meridiem}"


def say_date(day: date) -> str:
    return f"{day:%B} {day.day}, {day.year}"


def say_price(cents: int, currency: str = "USD") -> str:
    dollars, rest = divmod(cents, 100)
    amount = f"{dollars}" if not rest else f"{dollars}.{rest:02d}"
    return f"${amount}" if currency == "USD" else f"{amount} {currency}"


def say_list(items: Sequence[str], joiner: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {joiner} {items[-1]}"


def say_hours(opening_hours: dict[str, list[str]]) -> str:
    """{'mon': ['08:00', '17:00'], ...} → 'Monday 8 AM to 5 PM, ...' (closed days left out)."""
    names = {"mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday",
             "fri": "Friday", "sat": "Saturday", "sun": "Sunday"}
    parts = []
    for key, name in names.items():
        if key in opening_hours:
            opens, closes = opening_hours[key]
            parts.append(f"{name} {_clock(opens)} to {_clock(closes)}")
    return say_list(parts) if parts else "by appointment only"


def _clock(text: str) -> str:
    hour, minute = (int(part) for part in text.split(":"))
    twelve = hour % 12 or 12
    return f"{twelve}{f':{minute:02d}' if minute else ''} {'AM' if hour < 12 else 'PM'}"
