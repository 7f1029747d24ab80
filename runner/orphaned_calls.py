"""Closing the calls of a service process that is gone (`server_crash`).

A process killed mid-call (SIGKILL, out of memory, a lost machine) leaves its calls
open. At start, and then on every sweep, the calls whose owner is gone
(`db/instances.gone_owners`) are closed: ended at their last sign of life, with a
`call_ended` event, and with their recording salvaged from what reached this pod's disk
(`call/wav_file.salvage`), and its after-call analysis is queued (what the call got to,
and that it was cut off). A live pod's calls are never touched.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
from loguru import logger

from call.call_session import CompletionReason
from call.wav_file import Salvaged, salvage
from db import instances, open_calls
from db.instances import ProcessIdentity
from db.open_calls import Closure, OpenCall
from runner.call_analysis import queue_call_analysis

BATCH_LIMIT = 500  # calls closed per pass at most; the next pass takes the rest


async def close_orphaned_calls(
    pool: asyncpg.Pool, me: ProcessIdentity, recordings_dir: Path, *, stale_after_s: float,
    unowned_after_s: float, limit: int = BATCH_LIMIT,
) -> list[str]:
    """Close the open calls of gone processes (and unowned calls older than
    `unowned_after_s`, which no live call can be); the ids closed."""
    owners = await instances.gone_owners(pool, me, stale_after_s=stale_after_s)
    calls = await open_calls.calls_of(pool, owners, unowned_older_than_s=unowned_after_s,
                                      limit=limit)
    closed = []
    for call in calls:
        if await _close(pool, me, recordings_dir, call):
            closed.append(call.call_id)
            await queue_call_analysis(pool, call.call_id)  # what it got to is still summarised
    if closed:
        logger.warning(f"closed {len(closed)} call(s) left open by a process that is gone "
                       f"({CompletionReason.SERVER_CRASH.value})")
    return closed


async def _close(pool: asyncpg.Pool, me: ProcessIdentity, recordings_dir: Path,
                 call: OpenCall) -> bool:
    recording: Salvaged | None = None
    events: list[tuple[str, dict]] = []
    if call.connected:
        try:
            recording = await asyncio.to_thread(salvage, recordings_dir / f"{call.call_id}.wav")
        except OSError as error:
            logger.error(f"call {call.call_id}: recording not salvaged ({type(error).__name__})")
            events.append(("recording_failed", {"error": type(error).__name__,
                                                "salvage": True}))
        if recording is not None:
            events.append(("recording_salvaged", {"seconds": recording.seconds,
                                                  "header_repaired": recording.repaired}))
        elif not events:
            events.append(("recording_not_salvaged", {"why": "not_on_this_pod"}))
    events.append(("call_ended", {
        "reason": CompletionReason.SERVER_CRASH.value, "status_was": call.status,
        "owner": call.owner, "closed_by": me.instance_id,
    }))
    return await open_calls.close(pool, Closure(
        call.call_id, CompletionReason.SERVER_CRASH.value, ended_at=call.last_seen,
        events=events, recording_path=str(recording.path) if recording is not None else None,
    ))
