"""Stand-ins for a pool whose database misbehaves: drops, hangs, or answers on cue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg


class FlakyPool:
    """The first `failures` acquisitions fail like a dropped connection; then the real pool."""

    def __init__(self, pool: asyncpg.Pool, failures: int) -> None:
        self._pool = pool
        self.failures = failures

    def acquire(self, **kwargs: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionResetError("connection lost")
        return self._pool.acquire(**kwargs)


class HangingPool:
    """A database that accepts the connection and never answers."""

    def __init__(self) -> None:
        self.attempts = 0

    @asynccontextmanager
    async def acquire(self, **kwargs: Any) -> AsyncIterator[None]:
        self.attempts += 1
        await asyncio.sleep(3600)
        yield None


class GatedPool:
    """The real pool, but each acquisition waits for one `release()` of the gate."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.gate = asyncio.Semaphore(0)

    @asynccontextmanager
    async def acquire(self, **kwargs: Any) -> AsyncIterator[asyncpg.Connection]:
        await self.gate.acquire()
        async with self._pool.acquire(**kwargs) as conn:
            yield conn


async def closed_pool(dsn: str) -> asyncpg.Pool:
    """A real asyncpg pool that has been closed: every acquire fails as in an outage."""
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=1)
    await pool.close()
    return pool
