"""The pool: health check, JSON values, and pgvector once migrations created the extension."""

from pgvector import Vector

from config import Settings
from db.migrations import apply_migrations
from db.pool import Database


async def test_ping_is_true_for_a_live_database(db):
    assert await db.ping()


async def test_ping_reports_false_instead_of_raising_once_the_pool_is_closed(settings):
    database = await Database.connect(settings)
    await database.close()

    assert not await database.ping()
    assert not database.embedded


async def test_json_columns_round_trip_as_python_values(db, call_id):
    snapshot = {"voice": {"speed": 1.1}, "keyterms": ["MRI"], "at": None}

    await db.pool.execute(
        "UPDATE calls SET config_snapshot = $2 WHERE id = $1::uuid", call_id, snapshot
    )

    assert await db.pool.fetchval(
        "SELECT config_snapshot FROM calls WHERE id = $1::uuid", call_id
    ) == snapshot


async def test_vectors_decode_after_migrations_even_on_connections_opened_before(
    fresh_dsn, tmp_path
):
    database = await Database.connect(
        Settings(_env_file=None, data_dir=tmp_path, database_url=fresh_dsn), min_size=2
    )
    try:
        before = await database.pool.fetchval("SELECT to_regtype('vector') IS NOT NULL")

        await apply_migrations(database.pool)
        vector = await database.pool.fetchval("SELECT '[1,2,3]'::vector")
    finally:
        await database.close()

    assert before is False
    assert isinstance(vector, Vector) and vector.to_list() == [1.0, 2.0, 3.0]
