"""After a call: verify what it wrote, then push what is verified to the practice system.

Runs as the call's durable `post_call` job once its record is closed (`runner/post_call.py`,
never on a call's voice path), and on demand (`main.py verify-call`, the calls API). A
practice system that fails leaves the event unsynced with its error recorded; the next
run pushes it again. A flagged event whose booking (or the patient created for it)
already reached the practice system at booking time cannot be held back: its review
item says what to check there. After a call, a failure is also an event in the call's
record (`verification_failed`, `practice_sync_failed`): error classes and counts only,
never what the call said.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date

import asyncpg
from loguru import logger

from call.call_session import CallLog
from db import practice_writes, world
from processors.world.verification import Judges, VerificationReport, verify_call
from services.practice.base import PMSError, PracticeSystem


@dataclass
class SyncResult:
    pushed: int = 0
    already_there: int = 0
    unsupported: int = 0
    queued: int = 0  # bookings their own practice_push job writes
    failed: int = 0
    errors: list[str] = field(default_factory=list)


async def sync_verified(pool: asyncpg.Pool, workspace_id: str, practice: PracticeSystem,
                        *, call_id: str | None = None) -> SyncResult:
    """Push every verified, unsynced event of the workspace (or of one call)."""
    result = SyncResult()
    for event in await world.sync_ready(pool, workspace_id):
        if call_id is not None and event.call_id != call_id:
            continue
        try:
            outcome = await practice.push(event)
        except PMSError as error:
            result.failed += 1
            result.errors.append(f"{event.type}: {str(error)[:120]}")
            await world.mark_synced(pool, event.id, practice.name, error=str(error)[:300])
            continue
        setattr(result, outcome.status, getattr(result, outcome.status) + 1)
        await world.mark_synced(pool, event.id, practice.name)
    return result


async def verify_and_sync(pool: asyncpg.Pool, call_id: str, judges: Judges,
                          practice: PracticeSystem, *, today: date | None = None,
                          country_code: str = "1",
                          ) -> tuple[VerificationReport | None, SyncResult | None]:
    report = await verify_call(pool, call_id, judges, today=today, country_code=country_code)
    if report is None:
        return None, None
    await review_what_reached(pool, report, practice)
    workspace_id = await world.call_workspace(pool, call_id)
    synced = await sync_verified(pool, workspace_id, practice, call_id=call_id)
    logger.info(f"call {call_id}: verified ({report.classification.label}; "
                f"{report.counts}); synced {synced.pushed} to {practice.name}")
    return report, synced


async def review_what_reached(pool: asyncpg.Pool, report: VerificationReport,
                              practice: PracticeSystem) -> int:
    """Each flagged event whose booking or patient is already in the practice system
    gets the action a person must take there; how many."""
    label = practice.name.title()
    flagged = await world.events_by_ids(pool, list(report.flagged))
    marked = 0
    for event in flagged:
        booking = event.payload.get("appointment_id") or (
            event.entity_id if event.entity_table == "appointments" else None)
        what = await practice_writes.reached(
            pool, practice.name, event_type=event.type,
            appointment_id=str(booking) if booking else None, patient_id=event.patient_id)
        if what is None:
            continue
        subject = "booking" if what == "booking" else "patient's details"
        await practice_writes.set_review_action(
            pool, event.id, f"Check the {subject} in {label}: {report.flagged[event.id]}")
        marked += 1
    return marked


async def verify_after_call(pool: asyncpg.Pool, log: CallLog, judges: Judges,
                            practice: PracticeSystem, *, timeout_s: float,
                            country_code: str = "1", will_retry: bool = False) -> bool:
    """`verify_and_sync` for a call that just ended, within `timeout_s`; a failure of
    either step is an event on the call (`will_retry`: the job queue runs it again; it
    is re-runnable later too: `main.py verify-call`). Whether verification finished."""
    try:
        async with asyncio.timeout(timeout_s):
            _report, synced = await verify_and_sync(pool, log.call_id, judges, practice,
                                                    country_code=country_code)
    except Exception as error:  # noqa: BLE001 - the call is over; the record says so
        logger.warning(f"call {log.call_id}: verification not finished ({type(error).__name__})")
        log.event("verification_failed", error=type(error).__name__,
                  **({"will_retry": True} if will_retry else {}))
        return False
    if synced is not None and synced.failed:
        logger.warning(f"call {log.call_id}: {synced.failed} verified change(s) not pushed to "
                       f"{practice.name}; pushed again on the next run")
        log.event("practice_sync_failed", practice=practice.name, failed=synced.failed,
                  pushed=synced.pushed)
    return True
