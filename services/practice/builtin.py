"""The world model as the practice system (the default: nothing external to call).

Tool writes are already in the world model when their event is verified, so pushing
them finds them there. What extraction only reported (a new phone number, new
insurance) is applied now that it is verified, attributed to the sync.
"""

from __future__ import annotations

from datetime import date, datetime

import asyncpg

from db import scheduling, world
from db.scheduling import AppointmentType
from db.slots import Slot
from db.world import ClinicalEvent, CoverageSpec, Provenance
from services.practice.base import BookingMade, BookingOutcome, SlotConflict, SyncOutcome

APPLIED_AT_WRITE = {"patient_created", "contact_updated", "insurance_added",
                    "appointment_booked", "appointment_rescheduled", "appointment_cancelled",
                    "appointment_confirmed", "outbound_call_scheduled", "waitlist_added",
                    "preference_set", "registration_corrected"}


class BuiltinPractice:
    name = "builtin"

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def available_slots(
        self, service_id: str, *, appointment_type: AppointmentType, first_day: date,
        last_day: date, now: datetime, part_of_day: str | None = None,
    ) -> list[Slot]:
        return await scheduling.available_slots(
            self._pool, service_id, appointment_type=appointment_type, first_day=first_day,
            last_day=last_day, now=now, part_of_day=part_of_day,
        )

    async def book(
        self, slot: Slot, *, patient_id: str, call_id: str | None, replaces: str | None = None,
    ) -> BookingOutcome:
        try:
            return BookingMade(await scheduling.book(
                self._pool, slot, patient_id=patient_id, call_id=call_id, replaces=replaces))
        except scheduling.SlotTaken:
            return SlotConflict(slot, "world model")

    async def write_booking(self, appointment_id: str) -> SyncOutcome:
        """The booking is in the world model since it was held: nothing else to write."""
        return SyncOutcome("already_there", appointment_id)

    async def push(self, event: ClinicalEvent) -> SyncOutcome:
        if event.type in APPLIED_AT_WRITE:
            return SyncOutcome("already_there", event.entity_id)
        if event.patient_id is None:
            return SyncOutcome("unsupported", detail="no patient")
        provenance = Provenance("import", f"sync:{event.id}", "verified", event.call_id)
        if event.type == "contact_reported":
            record, _ = await world.update_contact(
                self._pool, event.workspace_id, event.patient_id,
                dict(event.payload["changes"]), provenance, record_event=False)
            return SyncOutcome("pushed", record.id)
        if event.type == "insurance_reported" and event.payload.get("member_id"):
            payload = event.payload
            coverage, _ = await world.create_coverage(
                self._pool, event.workspace_id, event.patient_id, CoverageSpec(
                    carrier_id=payload.get("carrier_id"), carrier_name=payload["carrier_name"],
                    member_id=payload["member_id"],
                    group_number=payload.get("group_number") or "",
                ), provenance, record_event=False)
            return SyncOutcome("pushed", coverage.id)
        return SyncOutcome("unsupported", detail=f"{event.type} has nothing to apply")
