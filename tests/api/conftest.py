"""Fixtures of the API tests that need them in more than one module: one running app per
module (`client`; a module may define its own) and a fresh outbound workspace per test
(`world`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from config import Settings
from tests.api.app_client import running_app
from tests.api.outbound_world import World, new_world


@pytest.fixture(scope="module")
async def client(db, pg_dsn, tmp_path_factory) -> AsyncIterator[httpx.AsyncClient]:
    """One running app for the module (starting one takes seconds)."""
    settings = Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("api"),
                        database_url=pg_dsn)
    async with running_app(settings) as (_, client):
        yield client


@pytest.fixture
async def world(db) -> World:
    return await new_world(db)
