"""The connection pool: `DATABASE_URL` when set, else the embedded server.

Every pooled connection decodes json/jsonb to Python values and, once the
`vector` extension exists (the first migration creates it), vectors via pgvector.
Connections opened before the extension existed are recycled by `apply_migrations`
(`refresh_connections`), so the codec is never missing after start-up.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial

import asyncpg
from loguru import logger
from pgvector.asyncpg import register_vector

from config import Settings
from db.embedded import EmbeddedPostgres

PING_TIMEOUT_S = 2.0
CLOSE_TIMEOUT_S = 5.0

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
        self, pool: asyncpg.Pool, dsn: str, embedded: EmbeddedPostgres | None = None
    ) -> None:
        self.pool = pool
        self._dsn = dsn
        self._embedded = embedded
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
        cls, settings: Settings, *, min_size: int = 1, max_size: int = 10
    ) -> Database:
        """Open the pool on `DATABASE_URL`, or start the embedded server and use that."""
        embedded: EmbeddedPostgres | None = None
        if settings.storage.database_url is not None:
            dsn = settings.storage.database_url.get_secret_value()
        else:
            embedded = EmbeddedPostgres(settings.storage.embedded_db_dir)
            dsn = await embedded.start()
        try:
            pool = await asyncpg.create_pool(
                dsn, min_size=min_size, max_size=max_size, init=init_connection
            )
        except BaseException:
            if embedded is not None:
                await embedded.stop()
            raise
        logger.info(f"database pool open ({'embedded' if embedded else 'DATABASE_URL'})")
        return cls(pool, dsn, embedded)

    async def ping(self, timeout: float = PING_TIMEOUT_S) -> bool:
        """Health check: a round trip within `timeout`; never raises."""
        try:
            async with asyncio.timeout(timeout):
                return await self.pool.fetchval("SELECT 1") == 1
        except Exception as error:
            logger.warning(f"database ping failed ({type(error).__name__})")
            return False

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


async def refresh_connections(pool: asyncpg.Pool) -> None:
    """Make every pooled connection be replaced (and re-initialised) on next acquire."""
    await pool.expire_connections()
