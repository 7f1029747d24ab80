"""Starts the real service (`python main.py serve`) on 127.0.0.1 against the session database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from config import Settings
from db import repositories as repo
from db.seed import seed_demo

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningServer:
    url: str
    data_dir: Path
    api_key: str
    settings: Settings
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="session")
async def server(db, tmp_path_factory) -> RunningServer:
    data_dir = tmp_path_factory.mktemp("server")
    seeded = await seed_demo(db.pool)
    api_key = await repo.create_api_key(db.pool, seeded.workspace_id, "e2e")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "DATABASE_URL": db._dsn,  # noqa: SLF001
        "DATA_DIR": str(data_dir),
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "INFO",
        "WS_MAX_BAD_MESSAGES": "20",
        "START_MESSAGE_TIMEOUT_S": "3",
    }
    log_path = data_dir / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "main.py", "serve"], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    settings = Settings(_env_file=None, data_dir=data_dir, database_url=db._dsn)  # noqa: SLF001
    running = RunningServer(url, data_dir, api_key, settings, process, log_path)
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as client:
        while True:
            if process.poll() is not None:
                pytest.fail(f"server exited at start-up:\n{running.log()}")
            try:
                if (await client.get(f"{url}/health")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"server did not become healthy:\n{running.log()}")
            time.sleep(0.2)
    yield running
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
