"""Versioned plain-SQL migrations (`db/migrations/NNNN_name.sql`), applied at start-up.

Each runs in its own transaction holding a transaction-scoped advisory lock, so
several processes starting together apply it exactly once; applied versions and
checksums are recorded in `schema_migrations`, and editing an applied migration is
an error, not a silent skip (history must not change under a running database).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from loguru import logger

from db.pool import refresh_connections

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
LOCK_ID = 7_406_311_001  # arbitrary constant meaning "this project's schema migrations"
MIGRATION_TIMEOUT_S = 24 * 3600.0  # the client waits for one migration at most this long
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""


class MigrationError(RuntimeError):
    """The migrations on disk disagree with what the database has applied."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration file in version order; refuses bad names and duplicate versions."""
    migrations: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise MigrationError(f"migration file name must be NNNN_name.sql: {path.name}")
        migrations.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    versions = [migration.version for migration in migrations]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a version number")
    return migrations


async def apply_migrations(pool: asyncpg.Pool, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply what is missing; returns the versions applied now (empty when up to date)."""
    migrations = load_migrations(directory)
    applied_now: list[int] = []
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_ID)
            await conn.execute(_CREATE_LEDGER)
        for migration in migrations:
            if await _apply_one(conn, migration):
                applied_now.append(migration.version)
        await _warn_about_unknown_versions(conn, migrations)
    if applied_now:
        # Connections opened before the schema existed lack its codecs (pgvector).
        await refresh_connections(pool)
    return applied_now


async def _apply_one(conn: asyncpg.Connection, migration: Migration) -> bool:
    """Apply one migration unless recorded; True when it ran now."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_ID)
        recorded = await conn.fetchval(
            "SELECT checksum FROM schema_migrations WHERE version = $1", migration.version
        )
        if recorded is not None:
            if recorded != migration.checksum:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} changed after it was "
                    "applied (checksum mismatch); add a new migration instead of editing it"
                )
            return False
        # A migration may rebuild a large table: no per-statement bound (DB_STATEMENT_TIMEOUT_S).
        await conn.execute("SET LOCAL statement_timeout = 0")
        await conn.execute(migration.sql, timeout=MIGRATION_TIMEOUT_S)
        await conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            migration.version, migration.name, migration.checksum,
        )
    logger.info(f"migration {migration.version:04d}_{migration.name} applied")
    return True


async def _warn_about_unknown_versions(
    conn: asyncpg.Connection, migrations: list[Migration]
) -> None:
    """A database migrated by newer code still works, but say so: a downgrade is suspect."""
    known = {migration.version for migration in migrations}
    recorded = {row["version"] for row in await conn.fetch("SELECT version FROM schema_migrations")}
    unknown = sorted(recorded - known)
    if unknown:
        logger.warning(f"database has migrations this code does not know: {unknown}")
