"""A job kind's retry policy, and whether the run under way is its last try.

A handler that raises is run again after a backoff until `max_attempts` retries are
spent (`runner/job_worker.py`); a handler that must tell someone when it gives up asks
`last_try` before it raises, so the last failure is the one that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from db import jobs
from runner.job_worker import Handler, JobKind


@dataclass(frozen=True)
class Retries:
    max_attempts: int  # retries after the first run
    initial_delay: timedelta  # doubling from here ...
    max_delay: timedelta  # ... up to here

    def kind(self, entrypoint: str, handler: Handler) -> JobKind:
        return JobKind(entrypoint, handler, max_attempts=self.max_attempts,
                       initial_delay=self.initial_delay, max_delay=self.max_delay)


async def last_try(pool: asyncpg.Pool, dedupe_key: str, retries: Retries) -> bool:
    """Whether the job under `dedupe_key` now runs for the last time (a failure is held
    as failed); also True with no such job (the handler was run directly)."""
    row = await jobs.job_for(pool, dedupe_key)
    return row is None or row.attempts >= retries.max_attempts
