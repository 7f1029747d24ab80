"""Versioned plain-SQL migrations (`db/migrations/NNNN_name.sql`), applied at start-up.

Each runs in its own transaction under an advisory lock, so several processes
starting together apply it once; applied versions and checksums are recorded in
`schema_migrations`, and editing an applied migration is an error, not a silent skip.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from loguru import logger

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
LOCK_ID = 7_406_311_001  # arbitrary, constant: "this project's migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """The migrations on disk disagree with what the database has applied."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"migration file name must be NNNN_name.sql: {path.name}")
        migrations.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    versions = [m.version for m in migrations]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migrations share a version number")
    return migrations


async def apply_migrations(pool: asyncpg.Pool, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply what is missing; returns the versions applied now (empty when up to date)."""
    migrations = load_migrations(directory)
    applied_now: list[int] = []
    async with pool.acquire() as conn:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for migration in migrations:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_ID)
                row = await conn.fetchrow(
                    "SELECT checksum FROM schema_migrations WHERE version = $1", migration.version
                )
                if row is not None:
                    if row["checksum"] != migration.checksum:
                        raise MigrationError(
                            f"migration {migration.version} ({migration.name}) changed after it "
                            "was applied; add a new migration instead"
                        )
                    continue
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version, migration.name, migration.checksum,
                )
                applied_now.append(migration.version)
                logger.info(f"migration {migration.version} ({migration.name}) applied")
    return applied_now
