"""Embedded PostgreSQL 16 + pgvector from the `pgserver` wheel: no database to install.

The server keeps its data under a directory of ours and listens only on a Unix
socket. A socket path must fit in `sockaddr_un.sun_path` (108 bytes on Linux), so
when the data directory is too deep pgserver puts the socket in a short runtime
directory instead; when neither fits we fail with a clear message rather than
pgserver's generic one. pgserver shares one server per data directory between
processes (the service and the CLI) and stops it when the last one lets go; within
one process we count handles ourselves, because pgserver's count is per process.
pgserver counts processes by PID in `.handle_pids.json` and never forgets one that died
without letting go (SIGKILL, a crash): we drop dead PIDs before joining and before
letting go, so the last live user always stops the server.

When the server dies under us, `restart` starts it again on the same data directory
and socket (the supervisor, `db.supervisor`, decides when).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
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
_restart_lock = threading.Lock()
PG_CTL_TIMEOUT_S = 20  # pgserver allows its own start 10 s
ORPHAN_WAIT_S = 2.0  # backends notice their postmaster died within milliseconds

# pgserver logs the whole server log (statements, values: PHI) when a start fails; ours
# say where that log is instead.
logging.getLogger("pgserver").addHandler(logging.NullHandler())
logging.getLogger("pgserver").propagate = False


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


def pid_is_live(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie, dead but not yet reaped, is not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


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
        import subprocess

        # Blocking: initdb on first use, then pg_ctl start (pgserver bounds it at 10 s).
        try:
            self._server = await asyncio.to_thread(self._start_blocking)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            raise EmbeddedDatabaseError(
                f"the embedded PostgreSQL did not start ({type(error).__name__}); its log is "
                f"{self.data_dir / 'log'}") from error
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

    def alive(self) -> bool:
        """Whether the server's postmaster process is running (stopped or frozen counts as
        running: only a dead one is restarted). Blocking: a file read and a process check."""
        pid = self._postmaster_pid()
        return pid is not None and pid_is_live(pid)

    async def restart(self, timeout_s: float) -> None:
        """Start the server again on the same data directory and socket after it died;
        TimeoutError past `timeout_s`, RuntimeError when it is not ours, is still
        restarting from an earlier attempt, or did not come up."""
        server = self._server
        if server is None:
            raise RuntimeError("the embedded server was not started by this handle")
        if not _restart_lock.acquire(blocking=False):
            raise RuntimeError("an earlier restart of the embedded server is still running")

        def restart_blocking() -> None:
            try:
                self._restart_blocking(server)
            finally:
                _restart_lock.release()

        work = asyncio.get_running_loop().run_in_executor(None, restart_blocking)
        # The thread cannot be cancelled: past the bound we stop waiting and it finishes
        # (or fails) on its own, holding the lock so no second restart races it.
        done, _ = await asyncio.wait({work}, timeout=timeout_s)
        if not done:
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise TimeoutError(f"embedded PostgreSQL did not restart within {timeout_s:g} s")
        work.result()
        logger.info(f"embedded PostgreSQL restarted (socket in {self.socket_dir})")

    def _restart_blocking(self, server: PostgresServer) -> None:
        """pg_ctl start with pgserver's own options, under pgserver's inter-process lock
        (pgserver's own start takes a zombie postmaster for a live one)."""
        import subprocess

        from pgserver._commands import pg_ctl
        from pgserver.postgres_server import PostgresServer as Server
        from pgserver.utils import PostmasterInfo

        socket_dir = server.get_postmaster_info().socket_dir or self.data_dir
        with Server._lock:  # pgserver's inter-process lock for its servers
            if not self.alive():  # else another process restarted it meanwhile
                self._clear_dead_server()
                try:
                    pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}",
                            "-l", str(self.data_dir / "log"), "start"],
                           pgdata=self.data_dir, user=server.system_user, timeout=PG_CTL_TIMEOUT_S)
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
                    raise RuntimeError(f"pg_ctl start failed ({type(error).__name__}); "
                                       f"see {self.data_dir / 'log'}") from None
            info = PostmasterInfo.read_from_pgdata(self.data_dir)
        if info is None or not pid_is_live(info.pid) or info.status != "ready":
            raise RuntimeError(f"embedded PostgreSQL did not come up; see {self.data_dir / 'log'}")
        server._postmaster_info = info  # so letting go stops this server, not the dead one

    def _clear_dead_server(self) -> None:
        """After the postmaster died: wait for (then end) the backends it left behind, and
        drop the lock files that name it while it lingers as a zombie (PostgreSQL would
        take the zombie for a running server and refuse to start). Only once no process of
        the old server is left, so two servers never share the data directory. Call under
        pgserver's lock."""
        import psutil

        pid = self._postmaster_pid()
        if pid is None or pid_is_live(pid):
            return
        orphans = []
        for process in psutil.process_iter(["cwd", "status"]):
            if (process.info["cwd"] == str(self.data_dir)
                    and process.info["status"] != psutil.STATUS_ZOMBIE):
                orphans.append(process)
        if orphans:
            _, left = psutil.wait_procs(orphans, timeout=ORPHAN_WAIT_S)
            for process in left:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            psutil.wait_procs(left, timeout=ORPHAN_WAIT_S)
            logger.warning(f"embedded PostgreSQL: {len(orphans)} backend(s) of the dead server "
                           f"gone ({len(left)} had to be killed)")
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # ours to reap when we are PID 1 (a container)
        if psutil.pid_exists(pid):  # a zombie still holds the PID the lock files name
            for lock in self._lock_files():
                with contextlib.suppress(OSError):
                    if lock.read_text().split("\n", 1)[0].strip() == str(pid):
                        lock.unlink()

    def _lock_files(self) -> list[Path]:
        """postmaster.pid and the socket's lock file (in the socket directory it names)."""
        pid_file = self.data_dir / "postmaster.pid"
        locks = [pid_file]
        try:
            lines = pid_file.read_text().split("\n")
        except OSError:
            return locks
        if len(lines) > 4 and lines[4].strip():
            locks += sorted(Path(lines[4].strip()).glob(f"{SOCKET_NAME}.lock"))
        return locks

    def _postmaster_pid(self) -> int | None:
        """The PID in postmaster.pid (its first line, written first), None without one."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first.strip())
        except (OSError, ValueError):
            return None

    def _start_blocking(self) -> PostgresServer:
        import pgserver
        from pgserver.postgres_server import PostgresServer as Server

        make_private_dirs(self.data_dir)
        socket_dir = choose_socket_dir(self.data_dir, Server.runtime_path)
        if socket_dir != self.data_dir:
            logger.info("embedded PostgreSQL: data dir too deep for a socket; using runtime dir")
        modes = folder_modes(self.data_dir.parent) if running_as_root() else {}
        with _handles_lock:
            self._prune_blocking()
            if (self.data_dir / "postmaster.pid").exists():
                with Server._lock:  # pgserver's inter-process lock for its servers
                    self._clear_dead_server()  # pgserver would join a zombie postmaster
            server = pgserver.get_server(self.data_dir, cleanup_mode="stop")
            _handles[self.data_dir] = _handles.get(self.data_dir, 0) + 1
        close_folders_again(modes)
        return server

    def _prune_blocking(self) -> None:
        """Forget users of this data directory's server that died without letting go."""
        from pgserver.postgres_server import PostgresServer as Server
        from pgserver.utils import DiskList

        users = self.data_dir / ".handle_pids.json"
        if not users.exists():
            return
        with Server._lock:  # pgserver's inter-process lock for its servers
            listed = DiskList(users).get()
            live = [pid for pid in listed if pid == os.getpid() or pid_is_live(pid)]
            if live != listed:
                DiskList(users).put(live)
        if live != listed:
            logger.info(f"embedded PostgreSQL: {len(listed) - len(live)} user(s) that died "
                        "without letting go forgotten")

    def _release_blocking(self, server: PostgresServer) -> None:
        with _handles_lock:
            remaining = _handles.get(self.data_dir, 1) - 1
            if remaining > 0:
                _handles[self.data_dir] = remaining
                return
            _handles.pop(self.data_dir, None)
            self._prune_blocking()
            server.cleanup()
        logger.info("embedded PostgreSQL handle released")
