"""The practice-management system (PMS) a clinic keeps its schedule and records in.

The agent reads the schedule through it. A booking reaches it when the caller says yes:
`book` re-checks the slot there, holds it in the world model, then writes it with a key
that finds an earlier try's booking, so a retried write never books twice. A write that
fails there is not lost: the booking stays held and a `practice_push` job (db/jobs)
retries `write_booking` with backoff until the clinic is told it never got there.
Everything else a call wrote reaches it after verification (`runner/after_call.py`).

- `BuiltinPractice` (default): the world model is the practice system.
- `ClinikoPractice` (`PMS_PROVIDER=cliniko`): Cliniko's public REST API.

Every upstream failure raises `PMSError` (`PMSRefused` when trying again cannot help);
tools classify it `pms`. A time someone else took since it was offered is no failure:
`book` answers `SlotConflict`, so the caller hears that it was just taken and is offered
the next one.
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


class PMSRefused(PMSError):
    """The practice system will never take this write as it stands (the data rejected,
    no record to match it to): a person must act; trying again cannot help."""


class TakenThere(PMSRefused):
    """A held booking's time was taken in the practice system before it got there."""


SyncStatus = Literal["pushed", "already_there", "unsupported", "queued"]


@dataclass(frozen=True)
class SyncOutcome:
    status: SyncStatus
    external_id: str | None = None
    detail: str = ""


PracticeStatus = Literal["local", "pending", "pushed"]


@dataclass(frozen=True)
class BookingMade:
    """The slot is held for the patient in the world model; `practice_status` says
    whether an external practice system has it too ('pushed'), is still to get it from
    the job queue ('pending', `deferred` says why), or is the world model ('local')."""

    appointment: Appointment
    practice_status: PracticeStatus = "local"
    deferred: str | None = None


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

    async def write_booking(self, appointment_id: str) -> SyncOutcome:
        """Bring a booking held at booking time to the practice system, idempotently (the
        `practice_push` job): 'pushed' once it is there, 'already_there' when nothing is
        left to write; `TakenThere` when its time went there first."""

    async def push(self, event: ClinicalEvent) -> SyncOutcome:
        """Write one verified event's change (a patient, a booking, a cancellation)."""
