"""The `post_call` job: what happens after a call (`after_call.verify_after_call`: verify
the call's writes, sync what is verified), durable.

`AppRuntime.verify_soon` queues it (one per call, `post_call:<call id>`) once the call's
record is closed, so a restart loses none: a worker that dies mid-run leaves it to
another. A run that does not finish is retried with backoff, then held as failed for a
person (`main.py verify-call` runs it again by hand). Every failure is an event on the
call's record, through a log opened past the events already there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from loguru import logger

from call.call_session import CallLog
from db import jobs
from db import repositories as repo
from db.writer import CallRecordWriter
from processors.world.verification import Judges
from runner.after_call import verify_after_call
from runner.job_retries import Retries, last_try
from services.practice.base import PracticeSystem

ENTRYPOINT = "post_call"
RETRIES = Retries(max_attempts=3, initial_delay=timedelta(seconds=30),
                  max_delay=timedelta(minutes=5))
VERIFY_TIMEOUT_S = 120.0
# A log opened on a finished call's record numbers its events this far past the last one
# written, leaving room for the call's own late events (its transcript's re-verification).
SEQ_ROOM = 100


def post_call_key(call_id: str) -> str:
    return f"{ENTRYPOINT}:{call_id}"


async def queue_post_call(db: asyncpg.Pool | asyncpg.Connection, call_id: str) -> int | None:
    """Queue the call's post-call work (None: it is already queued or running)."""
    return await jobs.enqueue(db, ENTRYPOINT, {"call_id": call_id},
                              dedupe_key=post_call_key(call_id))


async def call_log_after(pool: asyncpg.Pool, writer: CallRecordWriter | None,
                         call_id: str) -> CallLog:
    """A log for work on a call that has ended: its events follow the record's."""
    last = await repo.last_event_seq(pool, call_id)
    return CallLog(call_id, writer, first_event_seq=last + SEQ_ROOM + 1)


@dataclass(frozen=True)
class AfterCall:
    """What post-call work needs from the process."""

    pool: asyncpg.Pool
    writer: CallRecordWriter | None
    verifier: Judges
    practice: PracticeSystem
    country_code: str = "1"
    timeout_s: float = VERIFY_TIMEOUT_S


class PostCallUnfinished(Exception):
    """Verification did not finish (its event is on the call); the queue tries again."""


async def run_post_call(parts: AfterCall, payload: dict[str, Any], *,
                        retries: Retries = RETRIES) -> None:
    call_id = str(payload.get("call_id") or "")
    if not call_id:
        logger.warning("post_call job without a call id: nothing to do")
        return
    final = await last_try(parts.pool, post_call_key(call_id), retries)
    log = await call_log_after(parts.pool, parts.writer, call_id)
    finished = await verify_after_call(
        parts.pool, log, parts.verifier, parts.practice, timeout_s=parts.timeout_s,
        country_code=parts.country_code, will_retry=not final)
    if not finished:
        raise PostCallUnfinished(call_id)

