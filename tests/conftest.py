"""Shared fixtures: one embedded PostgreSQL for the whole test session."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from config import Settings
from db.migrations import apply_migrations
from db.pool import Database


@pytest.fixture(scope="session")
def session_data_dir():
    # Short path: the embedded server's socket lives under it.
    with tempfile.TemporaryDirectory(prefix="va-") as directory:
        yield Path(directory)


@pytest.fixture(scope="session")
async def db(session_data_dir) -> Database:
    settings = Settings(_env_file=None, data_dir=session_data_dir)
    database = await Database.connect(settings)
    await apply_migrations(database.pool)
    yield database
    await database.close()


@pytest.fixture
def settings(tmp_path, db) -> Settings:
    """Settings for one test, pointing at the session database, with its own data dir."""
    dsn = db._dsn  # noqa: SLF001 - the fixture shares its server on purpose
    return Settings(_env_file=None, data_dir=tmp_path, database_url=dsn)
