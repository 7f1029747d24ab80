"""The clinic file's shape (version 1): one pydantic model per section.

Unknown keys are refused (a typo must not be silently ignored). Each value is checked
on its own here; what holds between values (references, overlaps, hours) is checked in
`checks`.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from db.clinic.problems import short
from lib.url_templates import template_fields

VERSION = 1
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
E164 = re.compile(r"^\+[1-9]\d{6,14}$")
_PHONE_SEPARATORS = re.compile(r"[\s().-]")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
# What a clinic's own video link may be filled with: the appointment's id, a room name
# made from it, and the visit's day (YYYY-MM-DD).
VIDEO_LINK_FIELDS = frozenset({"appointment_id", "room", "date"})


def _phone(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return value
    number = _PHONE_SEPARATORS.sub("", value)
    if not E164.match(number):
        raise ValueError(f"{short(value)} is not a phone number in international form: "
                         'a plus, the country code and the number, e.g. "+15550100100"')
    return number


def _clock(value: Any) -> Any:
    if isinstance(value, time):
        return value
    match = _CLOCK.match(value) if isinstance(value, str) else None
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f'{short(value)} is not a time: write it like "09:00" or "17:30"')
    return time(int(match[1]), int(match[2]))


def _day(value: Any) -> Any:
    text = value.strip().lower() if isinstance(value, str) else value
    if text in WEEKDAYS:
        return text
    if text in _FULL_DAYS:
        return WEEKDAYS[_FULL_DAYS.index(text)]
    raise ValueError(f"{short(value)} is not a day: use {', '.join(WEEKDAYS[:-1])} or sun")


def _date(value: Any) -> Any:
    if isinstance(value, datetime):
        # pydantic reports a ValueError to the file's author, never a TypeError
        raise ValueError(  # noqa: TRY004
            f'{short(value)} is a date and time: write the date alone, e.g. "2026-12-25"')
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f'{short(value)} is not a date: write it like "2026-12-25"')


def _pair(value: Any) -> Any:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f'{short(value)} is not a pair of times: write ["09:00", "12:00"]')
    return value


def _storable(value: str) -> str:
    """Text the database can keep: YAML never reads a NUL, but JSON data may carry one."""
    if "\x00" in value:
        raise ValueError("a NUL character (\\x00) cannot be stored: remove it")
    return value


Phone = Annotated[str, BeforeValidator(_phone)]
# A time of day as the file writes it ("09:00"), in the API's schema too.
Clock = Annotated[time, BeforeValidator(_clock), PlainSerializer(lambda t: t.strftime("%H:%M")),
                  WithJsonSchema({"type": "string", "pattern": r"^([01]?\d|2[0-3]):[0-5]\d$",
                                  "examples": ["09:00"]})]
Hours = Annotated[tuple[Clock, Clock], BeforeValidator(_pair)]
Day = Annotated[str, BeforeValidator(_day)]
IsoDate = Annotated[date, BeforeValidator(_date)]
Storable = AfterValidator(_storable)
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
                 Storable]
Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000), Storable]
Said = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000),
                 Storable]
Keyword = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100),
                    Storable]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class VideoVisitSettings(_Section):
    """Where a video visit happens: a private Daily room made for each visit
    (`daily`, with the deployment's DAILY_API_KEY), or the clinic's own video service
    (`link`: its address, filled in for each visit)."""

    provider: Literal["daily", "link"]
    link: Annotated[str, StringConstraints(strip_whitespace=True, max_length=500),
                    Storable] | None = None

    @model_validator(mode="after")
    def _link_for_link(self) -> VideoVisitSettings:
        if self.provider == "link":
            if not self.link:
                raise ValueError('provider "link" needs the clinic\'s video address in `link`, '
                                 'e.g. "https://meet.example.org/visit/{room}"')
            template_fields(self.link, VIDEO_LINK_FIELDS, what="video link")
        elif self.link:
            raise ValueError('`link` is the clinic\'s own video address: only for provider '
                             '"link"')
        return self


class ClinicDetails(_Section):
    """Who the clinic is to callers, and the numbers that reach its agent."""

    name: Name
    phone_numbers: list[Phone] = Field(default_factory=list, max_length=100)
    greeting: Said | None = None  # None: the service's default greeting
    keyterms: list[Keyword] = Field(default_factory=list, max_length=200)
    video_visits: VideoVisitSettings | None = None  # None: no video visits


class OpeningHours(_Section):
    """Opening and closing time per day; a missing day is closed."""

    mon: Hours | None = None
    tue: Hours | None = None
    wed: Hours | None = None
    thu: Hours | None = None
    fri: Hours | None = None
    sat: Hours | None = None
    sun: Hours | None = None

    def on(self, day: str) -> tuple[time, time] | None:
        return getattr(self, day)

    def as_stored(self) -> dict[str, list[str]]:
        """The `locations.opening_hours` JSON: {"mon": ["08:00", "17:00"], ...}."""
        return {day: [hours[0].strftime("%H:%M"), hours[1].strftime("%H:%M")]
                for day in WEEKDAYS if (hours := self.on(day)) is not None}


class LocationEntry(_Section):
    name: Name
    timezone: Name
    address: Text
    phone_number: Phone | None = None  # where callers may be transferred
    opening_hours: OpeningHours


class PractitionerEntry(_Section):
    name: Name
    title: Text
    years_experience: int | None = Field(default=None, ge=0, le=80)


class AppointmentTypeEntry(_Section):
    name: Name
    duration_min: int = Field(gt=0, le=24 * 60)
    price_cents: int = Field(ge=0)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    description: Text
    keywords: list[Keyword] = Field(default_factory=list, max_length=100)
    video: bool | None = None  # a video visit: the booking gets its link
    # Paid when booking, through a payment link texted to the patient.
    deposit_cents: int | None = Field(default=None, gt=0)


class ScheduleEntry(_Section):
    """A practitioner's weekly hours at one location, and what they offer in them."""

    practitioner: Name
    location: Name
    days: list[Day] = Field(min_length=1, max_length=7 * 4)
    blocks: list[Hours] = Field(min_length=1, max_length=24)
    offers: list[Name] = Field(min_length=1, max_length=200)
    valid_from: IsoDate | None = None
    valid_until: IsoDate | None = None


class ClosureEntry(_Section):
    """Days the clinic (or one location) is closed; callers hear the reason."""

    from_: IsoDate = Field(alias="from")
    to: IsoDate | None = None  # None: the one day `from`
    reason: Said
    location: Name | None = None  # None: every location

    @property
    def last_day(self) -> date:
        return self.to or self.from_


SECTIONS = ("version", "clinic", "locations", "practitioners", "appointment_types",
            "schedules", "closures")
_LISTS = SECTIONS[2:]


class ClinicFile(_Section):
    """A whole clinic. Sections in the documented order; every list but `locations` may
    be left out (empty)."""

    version: int
    clinic: ClinicDetails
    locations: list[LocationEntry] = Field(min_length=1, max_length=200)  # a clinic has one
    practitioners: list[PractitionerEntry] = Field(default_factory=list, max_length=1000)
    appointment_types: list[AppointmentTypeEntry] = Field(default_factory=list, max_length=500)
    schedules: list[ScheduleEntry] = Field(default_factory=list, max_length=5000)
    closures: list[ClosureEntry] = Field(default_factory=list, max_length=2000)
    # The line of each key and list item in the text it was read from (path → line).
    _lines: dict[tuple[str | int, ...], int] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        """A section given with nothing under it (`closures:`) is an empty one."""
        if isinstance(data, dict):
            return {key: [] if value is None and key in _LISTS else value
                    for key, value in data.items()}
        return data

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        """The line of `path` in the text, or of the nearest enclosing key that has one."""
        for end in range(len(path), 0, -1):
            if (line := self._lines.get(path[:end])) is not None:
                return line
        return None

    def __eq__(self, other: object) -> bool:
        """The same clinic, whatever text (and lines) it was read from."""
        return isinstance(other, ClinicFile) and self.as_data() == other.as_data()

    __hash__ = None  # type: ignore[assignment]  (mutable, like every pydantic model)

    def as_data(self) -> dict[str, Any]:
        """JSON-ready, as a file would say it (aliases, no empty optional fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
