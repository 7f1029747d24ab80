"""The entries of a clinic file that are valid on their own, each with its index in the
file, so the rules between entries can still be checked when some entries are broken
(every problem is reported in one pass, not one round at a time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from db.clinic.model import (
    AppointmentTypeEntry,
    ClinicDetails,
    ClinicFile,
    ClosureEntry,
    LocationEntry,
    PractitionerEntry,
    ScheduleEntry,
)

T = TypeVar("T", bound=BaseModel)
NAMED = ("locations", "practitioners", "appointment_types")


@dataclass
class Sections:
    version: Any = None
    clinic: ClinicDetails | None = None
    locations: list[tuple[int, LocationEntry]] = field(default_factory=list)
    practitioners: list[tuple[int, PractitionerEntry]] = field(default_factory=list)
    appointment_types: list[tuple[int, AppointmentTypeEntry]] = field(default_factory=list)
    schedules: list[tuple[int, ScheduleEntry]] = field(default_factory=list)
    closures: list[tuple[int, ClosureEntry]] = field(default_factory=list)
    # Every name the file gives in a named section, valid entry or not: a reference to a
    # broken entry is not also reported as unknown.
    known: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, clinic: ClinicFile) -> Sections:
        return cls(
            version=clinic.version, clinic=clinic.clinic,
            locations=list(enumerate(clinic.locations)),
            practitioners=list(enumerate(clinic.practitioners)),
            appointment_types=list(enumerate(clinic.appointment_types)),
            schedules=list(enumerate(clinic.schedules)),
            closures=list(enumerate(clinic.closures)),
            known={name: {entry.name for entry in getattr(clinic, name)} for name in NAMED},
        )

    @classmethod
    def partial(cls, data: Any) -> Sections:
        """What validates of `data`, entry by entry (the rest was reported already)."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            version=data.get("version"), clinic=_one(ClinicDetails, data.get("clinic")),
            locations=_each(LocationEntry, data.get("locations")),
            practitioners=_each(PractitionerEntry, data.get("practitioners")),
            appointment_types=_each(AppointmentTypeEntry, data.get("appointment_types")),
            schedules=_each(ScheduleEntry, data.get("schedules")),
            closures=_each(ClosureEntry, data.get("closures")),
            known={name: _raw_names(data.get(name)) for name in NAMED},
        )


def _one(model: type[T], value: Any) -> T | None:
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def _each(model: type[T], values: Any) -> list[tuple[int, T]]:
    if not isinstance(values, list):
        return []
    valid = ((index, _one(model, value)) for index, value in enumerate(values))
    return [(index, entry) for index, entry in valid if entry is not None]


def _raw_names(values: Any) -> set[str]:
    if not isinstance(values, list):
        return set()
    return {v["name"].strip() for v in values
            if isinstance(v, dict) and isinstance(v.get("name"), str)}
