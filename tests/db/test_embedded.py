"""The embedded server: socket paths that fit, start on demand, stop when the last handle goes."""

import stat
import tempfile
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
