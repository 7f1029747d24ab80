"""The demo seed: a first start on an empty database gets a callable clinic, once."""

from config import Settings
from db import repositories as repo
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import CHECK_IN_NUMBER, DEMO_CLINIC, DEMO_NUMBER, is_empty, seed_demo


async def test_an_empty_database_is_seeded_once_and_edits_survive_a_reseed(fresh_dsn, tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=fresh_dsn)
    database = await Database.connect(settings)
    pool = database.pool
    try:
        await apply_migrations(pool)
        empty_before = await is_empty(pool)
        first = await seed_demo(pool)
        await repo.set_voice_settings(pool, first.workspace_id, {"speed": 1.2})
        second = await seed_demo(pool)
        empty_after = await is_empty(pool)
        service = await repo.find_service_by_phone(pool, DEMO_NUMBER)
        voice = await repo.get_voice_settings_raw(pool, first.workspace_id)
        check_in = await repo.find_service_by_phone(pool, CHECK_IN_NUMBER)
        counts = await pool.fetchrow(
            "SELECT (SELECT count(*) FROM workspaces) AS workspaces,"
            " (SELECT count(*) FROM services) AS services,"
            " (SELECT count(*) FROM memories) AS memories,"
            " (SELECT count(*) FROM reminders) AS reminders"
        )
    finally:
        await database.close()

    assert empty_before and not empty_after
    assert first == second
    assert service["id"] == first.service_id and service["name"] == DEMO_CLINIC
    assert DEMO_CLINIC in service["keyterms"]
    assert voice == {"speed": 1.2}
    # the clinic and its check-in line, each seeded once
    assert (counts["workspaces"], counts["services"]) == (1, 2)
    assert check_in["graph_id"] == "companion_checkin"
    assert (counts["memories"], counts["reminders"]) == (1, 1)

