"""After a call: verify what it wrote, then push what is verified to the practice system.

Runs in a bounded background task started by the call runner once the call record is
closed (never on a call's voice path), and on demand (`main.py verify-call`, the calls
API). A practice system that fails leaves the event unsynced with its error recorded;
the next run pushes it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import asyncpg
from loguru import logger

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
