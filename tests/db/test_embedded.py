"""The embedded server: socket paths that fit, start on demand, stop when the last handle goes."""

import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from config import Settings
from db.embedded import (
    MAX_SOCKET_PATH_BYTES,
    EmbeddedDatabaseError,
    EmbeddedPostgres,
    choose_socket_dir,
    socket_path_fits,
)
from db.pool import Database


def deep_dir(root: Path) -> Path:
    """A real directory whose socket path would overflow sun_path."""
    directory = root / ("d" * 60) / ("e" * 60)
    directory.mkdir(parents=True)
    assert not socket_path_fits(directory)
    return directory


@pytest.fixture
def server_root() -> Iterator[Path]:
    """A temp dir outside pytest's tree: as root, pgserver runs PostgreSQL as user
    `pgserver` and needs every ancestor traversable, and a concurrently starting
    pytest session resets /tmp/pytest-of-root to 0700."""
    with tempfile.TemporaryDirectory(prefix="vapg-", dir="/tmp") as directory:
        yield Path(directory)


def test_a_short_data_dir_hosts_its_own_socket(tmp_path):
    assert choose_socket_dir(tmp_path, Path("/run/unused")) == tmp_path


def test_a_deep_data_dir_puts_its_socket_in_the_short_runtime_dir(tmp_path):
    data_dir = deep_dir(tmp_path)

    socket_dir = choose_socket_dir(data_dir, Path("/tmp/rt"))

    assert socket_dir.parent == Path("/tmp/rt") and socket_path_fits(socket_dir)


def test_when_no_socket_path_fits_the_error_says_what_to_change(tmp_path):
    data_dir = deep_dir(tmp_path)
    runtime_root = Path("/") / ("r" * (MAX_SOCKET_PATH_BYTES - 10))

    with pytest.raises(EmbeddedDatabaseError, match=r"DATA_DIR.*DATABASE_URL"):
        choose_socket_dir(data_dir, runtime_root)


async def test_embedded_database_in_a_deep_data_dir_starts_shares_and_stops(server_root):
    settings = Settings(_env_file=None, data_dir=deep_dir(server_root), database_url=None)

    database = await Database.connect(settings)
    second_handle = EmbeddedPostgres(settings.storage.embedded_db_dir)
    second_dsn = await second_handle.start()
    await second_handle.stop()
    alive_after_other_handle_stopped = await database.ping()
    pgvector = await database.pool.fetchval(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    )
    await database.close()

    assert database.embedded and second_dsn == database.dsn
    assert "host=/" in database.dsn and str(settings.storage.embedded_db_dir) not in database.dsn
    assert alive_after_other_handle_stopped and pgvector
    assert not (settings.storage.embedded_db_dir / "postmaster.pid").exists()
    assert not await database.ping()


def _stop_if_running(data_dir: Path) -> None:
    """Teardown for a test that failed with the server still up: stop it, never leak it."""
    from pgserver._commands import pg_ctl

    if (data_dir / "postmaster.pid").exists():
        with contextlib.suppress(Exception):  # as root, PostgreSQL runs as user pgserver
            pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=data_dir,
                   user="pgserver" if os.geteuid() == 0 else None)


async def test_a_user_killed_without_letting_go_does_not_keep_the_server_running(server_root):
    data_dir = server_root / "pg"
    handle = EmbeddedPostgres(data_dir)
    await handle.start()
    joiner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", JOIN_AND_WAIT, str(data_dir), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        assert (await asyncio.wait_for(joiner.stdout.readline(), 60)).strip() == b"joined"
        joiner.kill()  # SIGKILL: it never lets go
        await joiner.wait()
        listed_after_kill = json.loads((data_dir / ".handle_pids.json").read_text())

        await handle.stop()

        assert joiner.pid in listed_after_kill
        assert not (data_dir / "postmaster.pid").exists()
    finally:
        if joiner.returncode is None:
            joiner.kill()
            await joiner.wait()
        _stop_if_running(data_dir)


async def test_an_embedded_server_that_died_is_restarted_on_the_same_socket(server_root):
    settings = Settings(_env_file=None, data_dir=server_root, database_url=None)
    database = await Database.connect(settings)
    try:
        postmaster = int((settings.storage.embedded_db_dir / "postmaster.pid").read_text()
                         .split()[0])
        os.kill(postmaster, signal.SIGKILL)
        dead = await _until(lambda: database.server_alive(), False, 10.0)
        refused = await database.probe(2.0)

        restarted = False
        for _ in range(20):  # its orphaned backends may hold the shared memory a moment
            try:
                await database.restart_server()
                restarted = True
                break
            except RuntimeError:
                await asyncio.sleep(0.5)

        assert dead and refused is not None and restarted
        assert await database.server_alive() and await database.ping(5.0)
    finally:
        await database.close()
        _stop_if_running(settings.storage.embedded_db_dir)


async def _until(check, wanted: object, timeout_s: float) -> bool:
    """Whether the awaitable `check()` gives `wanted` within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while await check() != wanted:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


ROOT = Path(__file__).resolve().parents[2]
JOIN_AND_WAIT = """
import asyncio, sys, time
from pathlib import Path
from db.embedded import EmbeddedPostgres
asyncio.run(EmbeddedPostgres(Path(sys.argv[1])).start())
print("joined", flush=True)
time.sleep(120)
"""


async def test_the_data_folder_stays_closed_to_other_accounts(server_root):
    data_dir = server_root / "data"
    settings = Settings(_env_file=None, data_dir=data_dir, database_url=None)

    database = await Database.connect(settings)
    try:
        alive = await database.ping()
    finally:
        await database.close()

    assert alive  # PostgreSQL's own user (as root: `pgserver`) still reaches its data
    for folder in (data_dir, server_root):
        mode = stat.S_IMODE(folder.stat().st_mode)
        assert mode & 0o066 == 0, f"{folder} is {oct(mode)}: others may list or write it"
