"""Migrations: applied once, re-runs are no-ops, concurrent starts are safe, history is fixed."""

import asyncio
import shutil

import asyncpg
import pytest

from db.migrations import MIGRATIONS_DIR, MigrationError, apply_migrations, load_migrations

SCHEMA_TABLES = {
    "workspaces", "api_keys", "voice_settings", "services", "calls", "turns",
    "state_transitions", "tool_calls", "call_events", "schema_migrations",
}


async def tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    return {row["table_name"] for row in rows}


async def test_a_fresh_database_gets_the_whole_schema_and_pgvector(fresh_dsn):
    pool = await asyncpg.create_pool(fresh_dsn, min_size=1, max_size=2)
    try:
        applied = await apply_migrations(pool)
        async with pool.acquire() as conn:
            present = await tables(conn)
            vector = await conn.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            ledger = await conn.fetch("SELECT version, checksum FROM schema_migrations")
    finally:
        await pool.close()

    assert applied == [m.version for m in load_migrations()] and applied[0] == 1
    assert present >= SCHEMA_TABLES
    assert vector
    assert {(row["version"], row["checksum"]) for row in ledger} == {
        (m.version, m.checksum) for m in load_migrations()
    }


async def test_rerunning_migrations_applies_nothing_and_records_each_once(db):
    applied = await apply_migrations(db.pool)

    rows = await db.pool.fetch("SELECT version, count(*) FROM schema_migrations GROUP BY version")
    assert applied == []
    assert rows and all(row["count"] == 1 for row in rows)


async def test_processes_starting_together_apply_each_migration_once(fresh_dsn):
    pools = [await asyncpg.create_pool(fresh_dsn, min_size=1, max_size=1) for _ in range(3)]
    try:
        results = await asyncio.gather(*(apply_migrations(pool) for pool in pools))
        recorded = await pools[0].fetchval("SELECT count(*) FROM schema_migrations")
    finally:
        await asyncio.gather(*(pool.close() for pool in pools))

    every_version = [m.version for m in load_migrations()]
    assert sorted(version for applied in results for version in applied) == every_version
    assert recorded == len(every_version)


async def test_an_edited_migration_is_an_error_not_a_silent_skip(db, tmp_path):
    edited = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, edited)
    first = sorted(edited.glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited after release\n")

    with pytest.raises(MigrationError, match="0001_initial changed after it was applied"):
        await apply_migrations(db.pool, edited)


async def test_a_failing_migration_leaves_nothing_behind_and_can_be_fixed(fresh_dsn, tmp_path):
    folder = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, folder)
    shipped = [m.version for m in load_migrations()]
    broken = folder / f"{shipped[-1] + 1:04d}_half_done.sql"
    broken.write_text("CREATE TABLE half_done (id int);\nSELECT no_such_function();\n")
    pool = await asyncpg.create_pool(fresh_dsn, min_size=1, max_size=1)
    try:
        with pytest.raises(asyncpg.UndefinedFunctionError):
            await apply_migrations(pool, folder)
        async with pool.acquire() as conn:
            after_failure = (await tables(conn), await conn.fetchval(
                "SELECT array_agg(version ORDER BY version) FROM schema_migrations"
            ))
        broken.write_text("CREATE TABLE half_done (id int);\n")
        applied_after_fix = await apply_migrations(pool, folder)
    finally:
        await pool.close()

    present, versions = after_failure
    assert "half_done" not in present and versions == shipped
    assert applied_after_fix == [shipped[-1] + 1]


async def test_a_badly_named_migration_file_is_refused(db, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "add_things.sql").write_text("SELECT 1")

    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        await apply_migrations(db.pool, folder)
