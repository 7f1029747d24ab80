"""Data-layer fixtures: an empty database per test, and a workspace with a call."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from db import repositories as repo
from db.pool import Database


def dsn_for_database(dsn: str, database: str) -> str:
    """The same server, another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture
async def fresh_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """An empty database on the session server (no migrations), dropped afterwards."""
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield dsn_for_database(pg_dsn, name)
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def workspace_id(db: Database) -> str:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    return workspace["id"]


@pytest.fixture
async def call_id(db: Database, workspace_id: str) -> str:
    return await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="in_progress",
    )
