"""The three named parts of a clinic kept in their own tables (locations, practitioners,
appointment types): their columns, and how a file entry maps to a row and back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from db.clinic.model import AppointmentTypeEntry, LocationEntry, PractitionerEntry


@dataclass(frozen=True)
class Kind:
    section: str  # the file's section
    table: str
    label: str  # one of them, in a message
    columns: tuple[str, ...]  # besides service_id and name
    entry: type[BaseModel]
    booking_column: str  # the appointments column that names one
    values: Callable[[Any], dict[str, Any]]

    def from_row(self, row: Any) -> Any:
        """The file entry a stored row says."""
        return self.entry.model_validate({"name": row["name"],
                                          **{column: row[column] for column in self.columns}})


def _location(entry: LocationEntry) -> dict[str, Any]:
    return {"timezone": entry.timezone, "address": entry.address,
            "phone_number": entry.phone_number, "opening_hours": entry.opening_hours.as_stored()}


def _practitioner(entry: PractitionerEntry) -> dict[str, Any]:
    return {"title": entry.title, "years_experience": entry.years_experience}


def _appointment_type(entry: AppointmentTypeEntry) -> dict[str, Any]:
    return {"description": entry.description, "duration_min": entry.duration_min,
            "price_cents": entry.price_cents, "currency": entry.currency,
            "keywords": list(entry.keywords), "video": entry.video,
            "deposit_cents": entry.deposit_cents}


LOCATIONS = Kind("locations", "locations", "location",
                 ("timezone", "address", "phone_number", "opening_hours"), LocationEntry,
                 "location_id", _location)
PRACTITIONERS = Kind("practitioners", "practitioners", "practitioner",
                     ("title", "years_experience"), PractitionerEntry, "practitioner_id",
                     _practitioner)
APPOINTMENT_TYPES = Kind("appointment_types", "appointment_types", "appointment type",
                         ("description", "duration_min", "price_cents", "currency", "keywords",
                          "video", "deposit_cents"),
                         AppointmentTypeEntry, "appointment_type_id", _appointment_type)
KINDS = (LOCATIONS, PRACTITIONERS, APPOINTMENT_TYPES)
