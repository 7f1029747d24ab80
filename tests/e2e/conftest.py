"""Starts the real service (`python main.py serve`) on 127.0.0.1 against the session database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from config import Settings
from db import repositories as repo
from db.seed import seed_demo
from tests.e2e.service_process import ServiceDidNotStart, ServiceProcess, start_service


@dataclass
class RunningServer:
    url: str
    data_dir: Path
    api_key: str
    settings: Settings
    process: ServiceProcess

    def log(self) -> str:
        return self.process.log()


@asynccontextmanager
async def another_server(
    server: RunningServer, db, tmp_path_factory, name: str, env: dict[str, str]
) -> AsyncIterator[RunningServer]:
    """A second service on the same database and API key, with settings of its own."""
    data_dir = tmp_path_factory.mktemp(name)
    full_env = {"DATABASE_URL": db._dsn, "DATA_DIR": str(data_dir), **env}  # noqa: SLF001
    try:
        process = await asyncio.to_thread(start_service, full_env, data_dir / "server.log")
    except ServiceDidNotStart as error:
        pytest.fail(str(error))
    storage = server.settings.storage.model_copy(update={"data_dir": data_dir})
    settings = server.settings.model_copy(update={"storage": storage})
    try:
        yield RunningServer(process.url, data_dir, server.api_key, settings, process)
    finally:
        process.stop()


async def start_demo_server(db, data_dir: Path, key_name: str,
                            env: dict[str, str]) -> RunningServer:
    """The service on the session database with the demo clinic and an API key of its own
    (`env` on top of the database and data folder); the test fails if it cannot start."""
    seeded = await seed_demo(db.pool)
    api_key = await repo.create_api_key(db.pool, seeded.workspace_id, key_name)
    full_env = {"DATABASE_URL": db._dsn, "DATA_DIR": str(data_dir), **env}  # noqa: SLF001
    try:
        process = await asyncio.to_thread(start_service, full_env, data_dir / "server.log")
    except ServiceDidNotStart as error:
        pytest.fail(str(error))
    settings = Settings(_env_file=None, data_dir=data_dir, database_url=db._dsn)  # noqa: SLF001
    return RunningServer(process.url, data_dir, api_key, settings, process)


@pytest.fixture(scope="package")
async def server(db, tmp_path_factory) -> RunningServer:
    """The demo service, shared by the end-to-end tests and stopped when they are done:
    its job worker runs jobs of the whole session database, so it must not outlive them
    into tests that set up their own clinics on that database."""
    running = await start_demo_server(db, tmp_path_factory.mktemp("server"), "e2e", {
        "LOG_LEVEL": "INFO",
        "WS_MAX_BAD_MESSAGES": "20",
        "START_MESSAGE_TIMEOUT_S": "3",
    })
    yield running
    running.process.stop()
