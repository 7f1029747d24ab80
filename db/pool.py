"""The connection pool: `DATABASE_URL` when set, else the embedded server.

Every pooled connection decodes json/jsonb to Python values and, once the
`vector` extension exists (the first migration creates it), vectors via pgvector.
Connections opened before the extension existed are recycled by `apply_migrations`
(`refresh_connections`), so the codec is never missing after start-up.

Every statement is bounded twice (`DB_STATEMENT_TIMEOUT_S`): the server cancels it
(`statement_timeout`) and the client stops waiting (asyncpg's `command_timeout`, which
also bounds the cancel and the reset a frozen server would never answer). Work on a
request's or a caller's path is bounded tighter with `Database.bounded`
(`db.deadline.within`, `DB_REQUEST_TIMEOUT_S`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from functools import partial
from typing import TypeVar

import asyncpg
from loguru import logger
from pgvector.asyncpg import register_vector

from config import Settings
from config.service import StorageSettings
from db.deadline import DatabaseUnavailable, track_connection, within
from db.embedded import EmbeddedPostgres

T = TypeVar("T")

CLOSE_TIMEOUT_S = 5.0
APPLICATION_NAME = "voice-agent"
POOL_SIZE = 10  # a process's pooled connections
# Connections a service process opens beside its pool: the job worker's, the event bus's
# two (sending, listening), one spare.
OWN_CONNECTIONS = 4
# Connections left to everyone else: superusers, the command line, a pod starting.
RESERVED_CONNECTIONS = 10
MIN_POOL_SIZE = 2

# Records are best kept over perfect: a value JSON cannot express is stored as its text.
_dumps = partial(json.dumps, default=str)


async def init_connection(conn: asyncpg.Connection) -> None:
    """Per-connection codecs (asyncpg `init` hook)."""
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=_dumps, decoder=json.loads, schema="pg_catalog"
        )
    if await conn.fetchval("SELECT to_regtype('vector') IS NOT NULL"):
        await register_vector(conn)


class Database:
    """Owns the pool and, when embedded, the server handle it started."""

    def __init__(
        self, pool: asyncpg.Pool, dsn: str, embedded: EmbeddedPostgres | None = None,
        storage: StorageSettings | None = None,
    ) -> None:
        self.pool = pool
        self._dsn = dsn
        self._embedded = embedded
        self._limits = storage or StorageSettings()
        self._closed = False

    @property
    def embedded(self) -> bool:
        """True when this process started the embedded server for this pool."""
        return self._embedded is not None

    @property
    def dsn(self) -> str:
        """The connection string (may hold a password: never log it)."""
        return self._dsn

    @classmethod
    async def connect(
        cls, settings: Settings, *, min_size: int = 1, max_size: int = POOL_SIZE
    ) -> Database:
        """Open the pool on `DATABASE_URL`, or start the embedded server and use that."""
        embedded: EmbeddedPostgres | None = None
        if settings.storage.database_url is not None:
            dsn = settings.storage.database_url.get_secret_value()
        else:
            embedded = EmbeddedPostgres(settings.storage.embedded_db_dir)
            dsn = await embedded.start()
        storage = settings.storage
        try:
            pool = await asyncpg.create_pool(
                dsn, min_size=min_size, max_size=max_size, init=init_connection,
                setup=track_connection, command_timeout=storage.db_statement_timeout_s,
                timeout=storage.db_connect_timeout_s,
                server_settings={
                    "statement_timeout": str(int(storage.db_statement_timeout_s * 1000)),
                    "application_name": APPLICATION_NAME,
                },
            )
        except BaseException:
            if embedded is not None:
                await embedded.stop()
            raise
        logger.info(f"database pool open ({'embedded' if embedded else 'DATABASE_URL'})")
        return cls(pool, dsn, embedded, storage)

    async def bounded(self, work: Awaitable[T], *, what: str,
                      timeout: float | None = None) -> T:
        """`work` (database calls on this pool) within `timeout` (default
        `DB_REQUEST_TIMEOUT_S`); DatabaseUnavailable when it cannot be done in time."""
        return await within(
            work, self._limits.db_request_timeout_s if timeout is None else timeout,
            what=what, cleanup_s=self._limits.db_cleanup_timeout_s,
        )

    async def probe(self, timeout: float | None = None) -> str | None:
        """Why the database cannot serve now (None: it answered a round trip in time)."""
        try:
            await self.bounded(self.pool.fetchval("SELECT 1"), what="ping",
                               timeout=self._limits.db_ping_timeout_s if timeout is None
                               else timeout)
        except DatabaseUnavailable as error:
            return error.reason
        except Exception as error:  # noqa: BLE001 - a health check reports, never raises
            return type(error).__name__
        return None

    async def ping(self, timeout: float | None = None) -> bool:
        """Health check: a round trip within `timeout`; never raises."""
        reason = await self.probe(timeout)
        if reason is not None:
            logger.warning(f"database ping failed ({reason})")
        return reason is None

    async def server_alive(self) -> bool:
        """False only when the embedded server's process is gone (an external server's
        process cannot be seen from here: True)."""
        if self._embedded is None:
            return True
        return await asyncio.to_thread(self._embedded.alive)

    async def restart_server(self) -> None:
        """Start the embedded server again after it died (bounded by DB_RESTART_TIMEOUT_S),
        then have every pooled connection replaced."""
        if self._embedded is None:
            raise RuntimeError("only the embedded server can be restarted from here")
        await self._embedded.restart(self._limits.db_restart_timeout_s)
        await self.refresh_connections()

    async def refresh_connections(self) -> None:
        """Re-run the connection init (codecs) on every connection, e.g. after a migration."""
        await refresh_connections(self.pool)

    async def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Close the pool (forcibly after `timeout`) and stop the server if we started it."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.wait_for(self.pool.close(), timeout)
        except Exception as error:
            logger.warning(f"pool did not close cleanly ({type(error).__name__}); terminating")
            self.pool.terminate()
        finally:
            if self._embedded is not None:
                await self._embedded.stop()


def pool_size_per_process(max_connections: int, processes: int) -> int:
    """The pool each of `processes` service processes on one database may open, so that
    together (their own connections beside) they stay within the server's
    `max_connections`: `POOL_SIZE` when there is room, never under `MIN_POOL_SIZE`."""
    share = (max_connections - RESERVED_CONNECTIONS) // max(1, processes) - OWN_CONNECTIONS
    return max(MIN_POOL_SIZE, min(POOL_SIZE, share))


async def refresh_connections(pool: asyncpg.Pool) -> None:
    """Make every pooled connection be replaced (and re-initialised) on next acquire."""
    await pool.expire_connections()
