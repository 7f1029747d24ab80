"""Embedded PostgreSQL 16 + pgvector from the `pgserver` wheel: no database to install.

The server keeps its data under a directory of ours and listens only on a Unix
socket. A socket path must fit in `sockaddr_un.sun_path` (108 bytes on Linux), so
when the data directory is too deep pgserver puts the socket in a short runtime
directory instead; when neither fits we fail with a clear message rather than
pgserver's generic one. pgserver shares one server per data directory between
processes (the service and the CLI) and stops it when the last one lets go; within
one process we count handles ourselves, because pgserver's count is per process.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from lib.private_files import make_private_dirs

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

SOCKET_NAME = ".s.PGSQL.5432"
# sun_path holds the path plus its NUL terminator.
MAX_SOCKET_PATH_BYTES = 103 if sys.platform == "darwin" else 107

# What PostgreSQL's own user needs of the folders above its data: to pass through them.
TRAVERSE = stat.S_IXGRP | stat.S_IXOTH

_handles_lock = threading.Lock()
_handles: dict[Path, int] = {}


class EmbeddedDatabaseError(RuntimeError):
    """The embedded server cannot run with this configuration."""


def socket_path_fits(directory: Path) -> bool:
    """Whether PostgreSQL's socket file inside `directory` is short enough to bind."""
    return len(os.fsencode(directory / SOCKET_NAME)) <= MAX_SOCKET_PATH_BYTES


def fallback_socket_dir(data_dir: Path, runtime_root: Path) -> Path:
    """The directory pgserver uses when the data directory is too long (same naming)."""
    identity = f"{data_dir}-{data_dir.stat().st_ino}"
    return runtime_root / hashlib.sha256(identity.encode()).hexdigest()[:10]


def choose_socket_dir(data_dir: Path, runtime_root: Path) -> Path:
    """Where the socket will live; raises when no candidate path is short enough."""
    if socket_path_fits(data_dir):
        return data_dir
    fallback = fallback_socket_dir(data_dir, runtime_root)
    if socket_path_fits(fallback):
        return fallback
    raise EmbeddedDatabaseError(
        f"the embedded database's Unix socket path would exceed {MAX_SOCKET_PATH_BYTES} bytes "
        f"both in DATA_DIR ({len(os.fsencode(data_dir))} bytes) and in the runtime directory "
        f"({runtime_root}); set DATA_DIR or XDG_RUNTIME_DIR to a shorter path, "
        "or set DATABASE_URL to use an external PostgreSQL"
    )


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def folder_modes(folder: Path) -> dict[Path, int]:
    """The permission bits of `folder` and of every folder above it."""
    modes: dict[Path, int] = {}
    for each in (folder, *folder.parents):
        try:
            modes[each] = stat.S_IMODE(each.stat().st_mode)
        except OSError:
            continue
    return modes


def close_folders_again(modes: dict[Path, int]) -> None:
    """As root, pgserver runs PostgreSQL as its own user and opens every folder above the
    data to everyone (read and traverse), the data folder with its recordings too. Give
    each folder its own mode back plus only the traverse bit that user needs."""
    for folder, mode in modes.items():
        wanted = mode | TRAVERSE
        try:
            if stat.S_IMODE(folder.stat().st_mode) != wanted:
                folder.chmod(wanted)
        except OSError as error:
            logger.warning(f"embedded PostgreSQL: folder mode not restored ({error.strerror})")


class EmbeddedPostgres:
    """One handle on the embedded server for `data_dir`; start on demand, stop once."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self._server: PostgresServer | None = None
        self._dsn: str | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def socket_dir(self) -> Path | None:
        """Where the server's socket is (None until started)."""
        server = self._server
        if server is None:
            return None
        return server.get_postmaster_info().socket_dir

    async def start(self) -> str:
        """Start (or join) the server and return an asyncpg-usable DSN. Idempotent."""
        if self._dsn is not None:
            return self._dsn
        # Blocking: initdb on first use, then pg_ctl start (pgserver bounds it at 10 s).
        self._server = await asyncio.to_thread(self._start_blocking)
        self._dsn = self._server.get_uri()
        logger.info(
            f"embedded PostgreSQL ready (data in {self.data_dir}, socket in {self.socket_dir})"
        )
        return self._dsn

    async def stop(self) -> None:
        """Let go of the server; it stops when no other handle or process still uses it."""
        server, self._server, self._dsn = self._server, None, None
        if server is not None:
            await asyncio.to_thread(self._release_blocking, server)

    def _start_blocking(self) -> PostgresServer:
        import pgserver
        from pgserver.postgres_server import PostgresServer as Server

        make_private_dirs(self.data_dir)
        socket_dir = choose_socket_dir(self.data_dir, Server.runtime_path)
        if socket_dir != self.data_dir:
            logger.info("embedded PostgreSQL: data dir too deep for a socket; using runtime dir")
        modes = folder_modes(self.data_dir.parent) if running_as_root() else {}
        with _handles_lock:
            server = pgserver.get_server(self.data_dir, cleanup_mode="stop")
            _handles[self.data_dir] = _handles.get(self.data_dir, 0) + 1
        close_folders_again(modes)
        return server

    def _release_blocking(self, server: PostgresServer) -> None:
        with _handles_lock:
            remaining = _handles.get(self.data_dir, 1) - 1
            if remaining > 0:
                _handles[self.data_dir] = remaining
                return
            _handles.pop(self.data_dir, None)
            server.cleanup()
        logger.info("embedded PostgreSQL handle released")
