"""A PostgreSQL connection of the live-operations plane's own (not the pool's).

The event bus's sender and the call registry's heartbeat write through it, and the
API's registry and replay reads use it: never a pooled connection, so a slow database
can hold no connection a call's own queries wait for. Every use is bounded
(`COMMAND_TIMEOUT_S` by default, lock wait included); a connection that failed or
outlived its bound is dropped and the next use opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from ops.outage import Outage

T = TypeVar("T")

CONNECT_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 2.0
APPLICATION_NAME = "voice-agent-ops"


async def connect(dsn: str) -> asyncpg.Connection:
    """A connection with short timeouts, named in pg_stat_activity."""
    return await asyncpg.connect(
        dsn, timeout=CONNECT_TIMEOUT_S, command_timeout=COMMAND_TIMEOUT_S,
        server_settings={"application_name": APPLICATION_NAME,
                         "statement_timeout": str(int(COMMAND_TIMEOUT_S * 1000))})


class PostgresLink:
    """One connection, used by one task at a time."""

    def __init__(self, dsn: str, what: str) -> None:
        self._dsn = dsn
        self._connection: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self.outage = Outage(what, "PostgreSQL")

    async def run(self, work: Callable[[asyncpg.Connection], Awaitable[T]], *,
                  timeout_s: float = COMMAND_TIMEOUT_S) -> T:
        """`work(connection)` within `timeout_s`; raises what it raised (TimeoutError past
        the bound), and the connection is then replaced."""
        async with asyncio.timeout(timeout_s), self._lock:
            try:
                if self._connection is None or self._connection.is_closed():
                    self._connection = await connect(self._dsn)
                return await work(self._connection)
            except BaseException:
                self._drop()
                raise

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            connection.terminate()  # a query may still be in flight: no goodbye

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), 1.0)
            if not connection.is_closed():
                connection.terminate()
