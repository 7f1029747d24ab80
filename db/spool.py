"""Append-only JSON-lines files on disk: where call records wait while the DB is away.

Appends take an exclusive `flock` and check that the file they locked is still the
one at the path, so a replay claiming (renaming) a spool file can never swallow
lines appended at that moment, by this process or another; locks are held for
microseconds, never across a replay. One replay at a time holds `replay.lock`, so
any claimed file it finds is its own or was abandoned by a crash: both get replayed.
Files are private (0600): they hold the same call content as the database.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

SPOOL_GLOB = "spool-*.jsonl"
CLAIMED_GLOB = "replaying-*.jsonl"
REJECTED_NAME = "rejected.jsonl"
REPLAY_LOCK_NAME = "replay.lock"
_APPEND_ATTEMPTS = 5


def _open_append(path: Path) -> IO[str]:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


def _is_at_path(handle: IO[str], path: Path) -> bool:
    """Whether the open file is still the file at `path` (not renamed away meanwhile)."""
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False


def append_lines(path: Path, lines: list[str]) -> None:
    """Append whole lines under an exclusive lock; raises OSError when the disk refuses."""
    if not lines:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    payload = "".join(line + "\n" for line in lines)
    for _ in range(_APPEND_ATTEMPTS):
        with _open_append(path) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if _is_at_path(handle, path):
                handle.write(payload)
                handle.flush()
                return
        # Claimed by a replay between open and lock: the next open makes a fresh file.
    raise OSError(f"spool file {path.name} kept moving; could not append")


@contextmanager
def claimed_files(directory: Path) -> Iterator[list[Path]]:
    """Claim every spool file for replay; empty while another replay is running."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(directory / REPLAY_LOCK_NAME, "a", encoding="utf-8") as replay_lock:
        try:
            fcntl.flock(replay_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield []
            return
        for path in sorted(directory.glob(SPOOL_GLOB)):
            _claim(path)
        yield sorted(directory.glob(CLAIMED_GLOB))


def _claim(path: Path) -> None:
    """Rename a spool file out of the appenders' way, between two appends."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if _is_at_path(handle, path):
            os.replace(path, path.with_name(f"replaying-{uuid.uuid4().hex}.jsonl"))
