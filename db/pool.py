"""The connection pool: `DATABASE_URL` when set, else the embedded server."""

from __future__ import annotations

import asyncio

import asyncpg
from loguru import logger

from config import Settings
from db.embedded import EmbeddedPostgres

PING_TIMEOUT_S = 2.0


async def _init_connection(conn: asyncpg.Connection) -> None:
    """JSON columns come back as Python values; vectors as numpy arrays (if pgvector exists)."""
    import json

    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
    has_vector = await conn.fetchval("SELECT 1 FROM pg_type WHERE typname = 'vector'")
    if has_vector:
        from pgvector.asyncpg import register_vector

        await register_vector(conn)


class Database:
    """Owns the pool and, when embedded, the server handle."""

    def __init__(self, pool: asyncpg.Pool, embedded: EmbeddedPostgres | None, dsn: str) -> None:
        self.pool = pool
        self._embedded = embedded
        self._dsn = dsn

    @property
    def embedded(self) -> bool:
        return self._embedded is not None

    @classmethod
    async def connect(cls, settings: Settings, *, min_size: int = 1, max_size: int = 10) -> Database:
        embedded = None
        if settings.database_url is not None:
            dsn = settings.database_url.get_secret_value()
        else:
            embedded = EmbeddedPostgres(settings.embedded_db_dir)
            dsn = await embedded.start()
        try:
            # The vector type may not exist until the first migration: create it first.
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except asyncpg.PostgresError as error:
                logger.warning(f"pgvector extension unavailable ({type(error).__name__})")
            finally:
                await conn.close()
            pool = await asyncpg.create_pool(
                dsn, min_size=min_size, max_size=max_size, init=_init_connection
            )
        except Exception:
            if embedded is not None:
                await embedded.stop()
            raise
        return cls(pool, embedded, dsn)

    async def ping(self) -> bool:
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                return await self.pool.fetchval("SELECT 1") == 1
        except Exception:
            return False

    async def close(self) -> None:
        await self.pool.close()
        if self._embedded is not None:
            await self._embedded.stop()
