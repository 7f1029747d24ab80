"""Data-layer fixtures: an empty database per test, a workspace with a call, and a record
writer on the session's database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from db.writer import CallRecordWriter


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
async def stored_writer(db, settings) -> AsyncIterator[CallRecordWriter]:
    """The call record writer a service runs, on the session's database; closed after."""
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    yield writer
    await writer.close(timeout=5)
