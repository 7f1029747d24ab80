"""After a call: verify what it wrote, then push what is verified to the practice system.

Runs in a bounded background task started by the call runner once the call record is
closed (never on a call's voice path), and on demand (`main.py verify-call`, the calls
API). A practice system that fails leaves the event unsynced with its error recorded;
the next run pushes it again. After a call, either failure is also an event in the call's
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
from db import world
from processors.world.verification import Judges, VerificationReport, verify_call
from services.practice.base import PMSError, PracticeSystem


@dataclass
class SyncResult:
    pushed: int = 0
    already_there: int = 0
    unsupported: int = 0
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
    workspace_id = await world.call_workspace(pool, call_id)
    synced = await sync_verified(pool, workspace_id, practice, call_id=call_id)
    logger.info(f"call {call_id}: verified ({report.classification.label}; "
                f"{report.counts}); synced {synced.pushed} to {practice.name}")
    return report, synced


async def verify_after_call(pool: asyncpg.Pool, log: CallLog, judges: Judges,
                            practice: PracticeSystem, *, timeout_s: float,
                            country_code: str = "1") -> None:
    """`verify_and_sync` for a call that just ended, within `timeout_s`; a failure of
    either step is an event on the call (re-runnable later: `main.py verify-call`)."""
    try:
        async with asyncio.timeout(timeout_s):
            _report, synced = await verify_and_sync(pool, log.call_id, judges, practice,
                                                    country_code=country_code)
    except Exception as error:  # noqa: BLE001 - the call is over; the record says so
        logger.warning(f"call {log.call_id}: verification not finished ({type(error).__name__})")
        log.event("verification_failed", error=type(error).__name__)
        return
    if synced is not None and synced.failed:
        logger.warning(f"call {log.call_id}: {synced.failed} verified change(s) not pushed to "
                       f"{practice.name}; pushed again on the next run")
        log.event("practice_sync_failed", practice=practice.name, failed=synced.failed,
                  pushed=synced.pushed)
