"""This process's heartbeat in the database, so other pods leave its calls alone.

A beat that fails (the database is down) is retried on the next one; a process whose
beats stop for `INSTANCE_STALE_AFTER_S` is taken for gone by pods on other machines.
"""

from __future__ import annotations

import asyncio

import asyncpg
from loguru import logger

from db import instances
from db.deadline import within
from db.instances import ProcessIdentity

BEAT_TIMEOUT_S = 5.0


async def beat_forever(pool: asyncpg.Pool, me: ProcessIdentity, interval_s: float) -> None:
    """Beat every `interval_s` until cancelled (never raises otherwise)."""
    failing = False
    while True:
        await asyncio.sleep(interval_s)
        try:
            await within(instances.heartbeat(pool, me), min(BEAT_TIMEOUT_S, interval_s),
                         what="heartbeat")
        except Exception as error:  # noqa: BLE001 - the next beat tries again
            if not failing:
                logger.warning(f"heartbeat not recorded ({type(error).__name__})")
            failing = True
            continue
        if failing:
            logger.info("heartbeat recorded again")
        failing = False
