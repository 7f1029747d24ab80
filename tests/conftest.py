"""Shared fixtures: one embedded PostgreSQL for the whole test session.

`pg_dsn` starts it once (in a short temp path: its Unix socket lives there), `db`
is a migrated `Database` on it, and `settings` points a test's own data dir at it.
Tests share the database, so they create their own workspaces and calls rather
than assuming empty tables.
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path

import asyncpg
import pytest

from call.call_session import CallSession
from config import Settings
from db import outbound
from db import repositories as repo
from db.embedded import EmbeddedPostgres
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import seed_clinic
from processors.world.field_grammar import FieldRecognizer
from runner.runtime import stop_worker_pools
from services.pocketsphinx.stt import DecoderPool
from services.prosody.emotion import ProsodyPool
from tests.fakes import CollectingWriter, make_session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts the real service (`e2e`) is in the slow set too."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)


def _short_temp_root() -> str | None:
    """/tmp when present: TMPDIR can be deep enough to overflow a socket path."""
    return "/tmp" if Path("/tmp").is_dir() else None


@pytest.fixture(scope="session", autouse=True)
def worker_pools_stop_with_the_session() -> Iterator[None]:
    """The worker pools the apps of this session left running (`tests/worker_pools.py`)
    stop with it."""
    yield
    stop_worker_pools()


@pytest.fixture
async def worker_pools_started() -> None:
    """The worker pools an app warms at its start, started on this (the main) thread, so
    that an app under TestClient finds them running (`tests/worker_pools.py`)."""
    await asyncio.gather(DecoderPool.shared().warm_up(), ProsodyPool.shared().warm_up(),
                         FieldRecognizer.shared().warm_up())


@pytest.fixture(scope="session")
async def pg_dsn() -> AsyncIterator[str]:
    """DSN of the session's embedded PostgreSQL 16 + pgvector (stopped at session end)."""
    with tempfile.TemporaryDirectory(prefix="vapg-", dir=_short_temp_root()) as directory:
        server = EmbeddedPostgres(Path(directory) / "pg")
        dsn = await server.start()
        try:
            yield dsn
        finally:
            await server.stop()


@pytest.fixture(scope="session")
async def db(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Database]:
    """A `Database` on the session server with every migration applied."""
    settings = Settings(
        _env_file=None, data_dir=tmp_path_factory.mktemp("db"), database_url=pg_dsn
    )
    database = await Database.connect(settings)
    await apply_migrations(database.pool)
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
def settings(tmp_path: Path, pg_dsn: str, db: Database) -> Settings:
    """Settings for one test: its own data dir, the session's (migrated) database."""
    return Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)


@pytest.fixture
async def workspace_id(db: Database) -> str:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    return workspace["id"]


@pytest.fixture
async def demo_clinic(db: Database, workspace_id: str) -> tuple[str, str]:
    """A service of its own with the demo clinic seeded from today: (workspace, service)."""
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    await seed_clinic(db.pool, workspace_id, service["id"], date.today())
    return workspace_id, service["id"]


@pytest.fixture
async def call_id(db: Database, workspace_id: str) -> str:
    return await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="in_progress",
    )


@pytest.fixture
def writer() -> CollectingWriter:
    """Collects what a call would write to its record."""
    return CollectingWriter()


@pytest.fixture
def session(writer: CollectingWriter) -> CallSession:
    """A phone call session recording into `writer`."""
    return make_session(writer)


@pytest.fixture(autouse=True)
async def empty_job_queue(request: pytest.FixtureRequest) -> None:
    """A test on the session's database starts with no durable jobs queued: one left by
    an earlier test would otherwise run in this test's service, in the middle of what the
    test measures."""
    if "db" in request.fixturenames:
        database: Database = request.getfixturevalue("db")
        await database.pool.execute("DELETE FROM pgqueuer")


@pytest.fixture
def task_writes_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing an outbound task fails (a read-only replica): a call back cannot be arranged."""
    async def refuse(conn, spec):
        raise asyncpg.exceptions.ReadOnlySQLTransactionError("read-only replica")

    monkeypatch.setattr(outbound, "create_task", refuse)
