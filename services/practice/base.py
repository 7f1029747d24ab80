"""The practice-management system (PMS) a clinic keeps its schedule and records in.

The agent reads the schedule through it, and writes reach it only after verification
(every write passes the multi-stage verification pipeline before data reaches an
external system): during the call every write lands in the world model
(which holds the slot), and `runner/after_call.py` pushes verified events to the
PMS afterwards.

- `BuiltinPractice` (default): the world model is the practice system.
- `ClinikoPractice` (`PMS_PROVIDER=cliniko`): Cliniko's public REST API.

Every upstream failure raises `PMSError`; tools classify it `pms`. A time someone else
took since it was offered is no failure: `book` answers `SlotConflict`, so the caller
hears that it was just taken and is offered the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal, Protocol

from db.scheduling import Appointment, AppointmentType
from db.slots import Slot
from db.world import ClinicalEvent


class PMSError(Exception):
    """The practice system failed or refused (network, auth, 5xx, unexpected shape)."""


SyncStatus = Literal["pushed", "already_there", "unsupported"]


@dataclass(frozen=True)
class SyncOutcome:
    status: SyncStatus
    external_id: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class BookingMade:
    """The slot is held for the patient (the world model keeps it; pushed after the call)."""

    appointment: Appointment


@dataclass(frozen=True)
class SlotConflict:
    """Someone else took the slot since it was offered; nothing was written."""

    slot: Slot
    where: str  # which system found it taken ("world model", "cliniko")


BookingOutcome = BookingMade | SlotConflict


class PracticeSystem(Protocol):
    name: str

    async def available_slots(
        self, service_id: str, *, appointment_type: AppointmentType, first_day: date,
        last_day: date, now: datetime, part_of_day: str | None = None,
    ) -> list[Slot]:
        """Open times of one type (practitioner and location ids are the world model's)."""

    async def book(
        self, slot: Slot, *, patient_id: str, call_id: str | None, replaces: str | None = None,
    ) -> BookingOutcome:
        """Hold an offered slot for the patient (and cancel `replaces`, for a reschedule),
        or say it was just taken; anything else that goes wrong raises."""

    async def push(self, event: ClinicalEvent) -> SyncOutcome:
        """Write one verified event's change (a patient, a booking, a cancellation)."""
