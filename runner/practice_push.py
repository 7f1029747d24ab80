"""The `practice_push` job: a booking held on a call reaches the practice system.

Queued with the booking, in the transaction that holds the slot (`db.scheduling.book`,
`push_after`), and cancelled when the write at booking time gets there first. Each run
asks the practice system to `write_booking`, which finds an earlier try's booking by its
key, so a run repeated after a lost answer or a dead worker never books twice. A failure
is retried with backoff (minutes apart at the end); when the time was taken there first,
the data is refused, or the last try fails, the clinic is told: the booking is marked
'failed', a review item says what to do, and the call that booked it gets an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from loguru import logger

from db import practice_writes
from db.practice_writes import PracticeWrite
from db.writer import CallRecordWriter
from runner.job_retries import Retries, last_try
from runner.post_call import call_log_after
from services.practice.base import PMSError, PMSRefused, PracticeSystem, TakenThere

ENTRYPOINT = practice_writes.PUSH_JOB
# Nine runs over about 35 minutes: 15 s, 30 s, 1, 2, 4, 8 minutes, then 10 minutes apart.
RETRIES = Retries(max_attempts=8, initial_delay=timedelta(seconds=15),
                  max_delay=timedelta(minutes=10))


@dataclass(frozen=True)
class Pusher:
    """What a push needs from the process."""

    pool: asyncpg.Pool
    practice: PracticeSystem
    writer: CallRecordWriter | None


async def push_booking(parts: Pusher, payload: dict[str, Any], *,
                       retries: Retries = RETRIES) -> None:
    appointment_id = str(payload.get("appointment_id") or "")
    write = await practice_writes.write_state(parts.pool, appointment_id)
    if write is None or write.practice_status not in ("pending", "failed"):
        return  # gone, written already, or never meant for the practice system
    try:
        outcome = await parts.practice.write_booking(appointment_id)
    except TakenThere as error:
        await _give_up(parts, write, "taken", str(error), _taken_action(parts, write))
        return
    except PMSRefused as error:
        await _give_up(parts, write, "refused", str(error), _by_hand_action(parts, str(error)))
        return
    except Exception as error:  # every failure is retried, then the clinic is told
        reason = _short(error)
        if await last_try(parts.pool, practice_writes.push_key(appointment_id), retries):
            await _give_up(parts, write, "attempts_spent", reason,
                           _by_hand_action(parts, reason))
        else:
            await practice_writes.note_error(parts.pool, appointment_id, reason)
        logger.warning("booking push to {} failed: {}", parts.practice.name, reason)
        raise
    if outcome.external_id is None:
        await practice_writes.mark_not_needed(parts.pool, appointment_id)
        return
    await practice_writes.mark_pushed(parts.pool, appointment_id)
    if write.practice_status == "failed":  # a person retried it, and it got there
        await practice_writes.resolve_unwritten(parts.pool, appointment_id,
                                                system=parts.practice.name)
    logger.info("booking {} written to {} by its push job", appointment_id,
                parts.practice.name)


async def _give_up(parts: Pusher, write: PracticeWrite, why: str, reason: str,
                   action: str) -> None:
    """The clinic is told: the booking marked failed, a review item, and an event on the
    call that booked it."""
    system = parts.practice.name
    await practice_writes.mark_failed(parts.pool, write.appointment_id, reason)
    await practice_writes.flag_unwritten(parts.pool, write, system=system, reason=reason,
                                         action=action)
    if write.call_id is not None:
        log = await call_log_after(parts.pool, parts.writer, write.call_id)
        log.event("practice_write_failed", practice=system, why=why, error=reason[:200])
    logger.warning("booking {} not written to {} ({}): the clinic is told",
                   write.appointment_id, system, why)


def _taken_action(parts: Pusher, write: PracticeWrite) -> str:
    label = parts.practice.name.title()
    moved = (" The booking it replaced is still there and must be cancelled too."
             if write.replaces else "")
    return (f"The time was taken in {label} before this booking reached it: call the "
            f"patient to find another time, then book it in {label}.{moved}")


def _by_hand_action(parts: Pusher, reason: str) -> str:
    label = parts.practice.name.title()
    return f"Book this appointment in {label} by hand ({reason})."


def _short(error: BaseException) -> str:
    """A failure for the record: the practice system's own short message (no PHI), else
    the error's class."""
    if isinstance(error, PMSError):
        return str(error)[:200]
    return type(error).__name__

