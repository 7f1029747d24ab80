"""Counts that the processes of one machine share: keyed holds that expire, and each
process's count of running things.

The worker processes behind one port must agree on how much the machine carries: a
thing one process took on (a hold, by key) may be let go by another, and every process
sees every other's count at once, without a round trip to anything. Both live in
shared memory (made by the parent before it spawns the workers, handed to each as it
starts) behind one inter-process lock, held for microseconds: an `flock` on a file of
the parent's, which the kernel takes from a process that dies holding it (a killed
worker never leaves the others waiting). Expiry uses the monotonic clock, which every
process on a Linux machine shares. A single process uses the same structure in its own
memory, behind a thread lock.

A process that dies keeps its count until its parent clears it (`clear_process`); its
holds expire on their own.
"""

from __future__ import annotations

import fcntl
import hashlib
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np

HOLD = np.dtype([("key", "<u8"), ("until", "<f8")])


class MachineLock:
    """An exclusive lock across the processes of one machine (and the threads of each):
    an `flock` on `path`, opened by each process on first use, dropped by the kernel
    with a process that dies holding it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.Lock()
        self._fd: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}  # each process opens the file for itself

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])

    def __enter__(self) -> MachineLock:
        self._threads.acquire()
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    @classmethod
    def new(cls, directory: Path | None = None) -> MachineLock:
        """A lock on a new private file (the maker removes it with `remove`)."""
        fd, name = tempfile.mkstemp(prefix="voice-agent-lines-", suffix=".lock", dir=directory)
        os.close(fd)
        return cls(Path(name))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def key_of(name: str) -> int:
    """A hold's key as stored: 64 bits of the name's hash, never 0 (0 marks a free slot)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") or 1


@dataclass(frozen=True)
class SharedSlots:
    """Holds and per-process counts; `index` is this process's count's place."""

    holds_buffer: Any  # HOLD records, in shared memory or this process's own
    counts_buffer: Any  # one int64 per process
    lock: Any  # a MachineLock (a thread lock for a single process)
    index: int = 0
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def shared(cls, processes: int, slots: int, context: BaseContext | None = None, *,
               lock_dir: Path | None = None) -> SharedSlots:
        """In shared memory, for `processes` processes the caller is about to start (its
        lock file in `lock_dir`, the temporary folder by default: `remove` when done)."""
        context = context or multiprocessing.get_context("spawn")
        return cls(context.RawArray("b", slots * HOLD.itemsize),
                   context.RawArray("b", processes * 8), MachineLock.new(lock_dir))

    def remove(self) -> None:
        """The maker is done with it: its lock file goes."""
        if isinstance(self.lock, MachineLock):
            self.lock.remove()

    @classmethod
    def local(cls, slots: int) -> SharedSlots:
        """For a single process."""
        return cls(bytearray(slots * HOLD.itemsize), bytearray(8), threading.Lock())

    def for_process(self, index: int) -> SharedSlots:
        """This structure as process `index` uses it."""
        if not 0 <= index < self.processes:
            raise ValueError(f"process {index} of {self.processes}")
        return replace(self, index=index)

    @property
    def processes(self) -> int:
        return len(memoryview(self.counts_buffer).cast("B")) // 8

    def _holds(self) -> np.ndarray:
        return np.frombuffer(self.holds_buffer, dtype=HOLD)

    def _counts(self) -> np.ndarray:
        return np.frombuffer(self.counts_buffer, dtype="<i8")

    def hold(self, name: str, ttl_s: float) -> bool:
        """Hold `name` for `ttl_s` from now (again, if already held). A full table gives
        up the hold nearest its end for it: False then."""
        key, now = key_of(name), self.clock()
        with self.lock:
            holds = self._holds()
            mine = np.flatnonzero(holds["key"] == key)
            free = mine if mine.size else np.flatnonzero(
                (holds["key"] == 0) | (holds["until"] <= now))
            place = int(free[0]) if free.size else int(np.argmin(holds["until"]))
            holds[place] = (key, now + ttl_s)
            return bool(free.size)

    def release(self, name: str) -> bool:
        """Let go of `name`, whoever held it; False when it was not held (or had expired)."""
        key, now = key_of(name), self.clock()
        with self.lock:
            holds = self._holds()
            mine = np.flatnonzero(holds["key"] == key)
            live = bool(mine.size) and bool((holds["until"][mine] > now).any())
            holds[mine] = (0, 0.0)
            return live

    def held(self) -> int:
        """Holds that have not expired."""
        now = self.clock()
        holds = self._holds()
        return int(np.count_nonzero((holds["key"] != 0) & (holds["until"] > now)))

    def set_count(self, count: int) -> None:
        """This process's own count (one aligned 8-byte store: no lock needed)."""
        self._counts()[self.index] = count

    def others(self) -> int:
        """The counts of every other process."""
        counts = self._counts()
        return int(counts.sum() - counts[self.index])

    def total(self, own_count: int) -> int:
        """Every hold not expired, every other process's count, and `own_count`."""
        with self.lock:
            return self.held() + self.others() + own_count

    def clear_process(self, index: int) -> None:
        """Process `index` is gone: its count goes with it."""
        self._counts()[index] = 0
