"""How times, prices and lists are said aloud: one place, so tools and templates agree."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta

# Within this many days a day is said by its name alone ("Saturday").
NAMED_DAYS_AHEAD = 6


def say_time(moment: datetime) -> str:
    """'Tuesday, December 1 at 9 AM' / '9:30 AM': the way a receptionist reads a slot."""
    hour = moment.hour % 12 or 12
    minutes = f":{moment.minute:02d}" if moment.minute else ""
    meridiem = "AM" if moment.hour < 12 else "PM"
    return f"{moment:%A}, {moment:%B} {moment.day} at {hour}{minutes} {meridiem}"


def say_date(day: date) -> str:
    return f"{day:%B} {day.day}, {day.year}"


def say_clock(moment: time | datetime) -> str:
    """'8 AM', '5:30 PM': a time of day as a receptionist says it."""
    hour = moment.hour % 12 or 12
    minutes = f":{moment.minute:02d}" if moment.minute else ""
    return f"{hour}{minutes} {'AM' if moment.hour < 12 else 'PM'}"


def say_day(day: date, today: date, *, with_date: bool = False) -> str:
    """'today', 'tomorrow', 'Saturday' (within the week), else 'Saturday, December 26';
    `with_date` always names the date ('Thursday, December 24')."""
    if not with_date and day == today:
        return "today"
    if not with_date and day == today + timedelta(days=1):
        return "tomorrow"
    if not with_date and today < day <= today + timedelta(days=NAMED_DAYS_AHEAD):
        return f"{day:%A}"
    return f"{day:%A}, {day:%B} {day.day}"


def say_opening(moment: datetime, now: datetime) -> str:
    """When a place opens again, from `now`: 'tomorrow at 8 AM', 'Monday at 9 AM',
    'Monday, January 4 at 8 AM' (the day as it is where the place is)."""
    today = now.astimezone(moment.tzinfo).date() if moment.tzinfo else now.date()
    return f"{say_day(moment.date(), today)} at {say_clock(moment)}"


# A call due this soon is said to come "shortly".
SOON = timedelta(minutes=10)


def say_calling_time(moment: datetime, now: datetime) -> str:
    """When the clinic's call will come, as the caller hears it, in `moment`'s own
    timezone: 'shortly', 'later today after 2 PM', 'tomorrow morning
    from 9 AM', 'on Monday from 9 AM', 'on Monday, December 7 from 9 AM'."""
    if moment - now <= SOON:
        return "shortly"
    today = now.astimezone(moment.tzinfo).date() if moment.tzinfo else now.date()
    day = moment.date()
    if day == today:  # "after" the quarter hour it falls in: still true, easier to hear
        return f"later today after {say_clock(moment.replace(minute=moment.minute // 15 * 15))}"
    if day == today + timedelta(days=1):
        return f"tomorrow {_part_of_day(moment)} from {say_clock(moment)}"
    return f"on {say_day(day, today)} from {say_clock(moment)}"


def _part_of_day(moment: datetime) -> str:
    return "morning" if moment.hour < 12 else "afternoon" if moment.hour < 17 else "evening"


def say_days(first: date, last: date) -> str:
    """'December 24', 'December 24 to 26', 'December 30 to January 2'."""
    if first == last:
        return f"{first:%B} {first.day}"
    if (first.year, first.month) == (last.year, last.month):
        return f"{first:%B} {first.day} to {last.day}"
    return f"{first:%B} {first.day} to {last:%B} {last.day}"


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
    """{'mon': ['08:00', '17:00'], ...} → 'Monday to Wednesday 8 AM to 5 PM and Thursday ...'
    (days in a row with the same hours are said once; closed days are left out)."""
    names = {"mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday",
             "fri": "Friday", "sat": "Saturday", "sun": "Sunday"}
    runs: list[tuple[str, str, tuple[str, ...]]] = []  # first day, last day, hours
    previous: str | None = None
    for key, name in names.items():
        hours = tuple(opening_hours.get(key, ()))
        if hours and runs and previous is not None and runs[-1][2] == hours:
            runs[-1] = (runs[-1][0], name, hours)
        elif hours:
            runs.append((name, name, hours))
        previous = key if hours else None
    parts = [
        f"{first if first == last else f'{first} to {last}'} {_clock(h[0])} to {_clock(h[1])}"
        for first, last, h in runs
    ]
    return say_list(parts) if parts else "by appointment only"


def _clock(text: str) -> str:
    hour, minute = (int(part) for part in text.split(":"))
    twelve = hour % 12 or 12
    return f"{twelve}{f':{minute:02d}' if minute else ''} {'AM' if hour < 12 else 'PM'}"


def say_phone(number: str) -> str:
    """'+13125550199' → '3 1 2, 5 5 5, 0 1 9 9': digit by digit, in its usual groups."""
    digits = "".join(ch for ch in number if ch.isdigit())
    if len(digits) == 11 and digits.startswith("1"):
        digits = digits[1:]
    groups = [digits[:3], digits[3:6], digits[6:]] if len(digits) == 10 else [digits]
    return ", ".join(" ".join(group) for group in groups if group)
