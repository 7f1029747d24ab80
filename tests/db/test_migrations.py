"""Migrations: applied once, re-runs are no-ops, edited history is refused."""

import shutil

import pytest

from db.migrations import MIGRATIONS_DIR, MigrationError, apply_migrations


async def test_rerunning_migrations_applies_nothing_and_records_each_once(db):
    assert await apply_migrations(db.pool) == []
    rows = await db.pool.fetch("SELECT version, count(*) FROM schema_migrations GROUP BY version")
    assert rows and all(row["count"] == 1 for row in rows)


async def test_fresh_database_gets_every_table_and_pgvector(db):
    await db.pool.execute("CREATE SCHEMA fresh")
    try:
        async with db.pool.acquire() as conn:
            await conn.execute("SET search_path TO fresh, public")
            tables = {
                row["table_name"] for row in await conn.fetch(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                )
            }
        assert {"workspaces", "api_keys", "voice_settings", "services", "calls", "turns",
                "state_transitions", "tool_calls", "call_events", "schema_migrations"} <= tables
        assert await db.pool.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
    finally:
        await db.pool.execute("DROP SCHEMA fresh CASCADE")


async def test_an_edited_migration_is_an_error_not_a_silent_skip(db, tmp_path):
    edited = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, edited)
    first = sorted(edited.glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited after release\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await apply_migrations(db.pool, edited)


async def test_a_badly_named_migration_file_is_refused(db, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "add_things.sql").write_text("SELECT 1")
    with pytest.raises(MigrationError, match="NNNN_name.sql"):
        await apply_migrations(db.pool, folder)
