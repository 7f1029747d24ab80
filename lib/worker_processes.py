"""Worker processes that live and die with the service process.

The offline decoders and the prosody analyzer run in spawned worker processes. A
`ProcessPoolExecutor` worker whose parent is killed (SIGKILL, a crash, an operator's
`kill -9`) does not notice: it sleeps on its task queue for ever, holding its memory
(~90 MB each). Every worker started here asks the kernel to end it when its parent
goes (Linux `PR_SET_PDEATHSIG`) and, where that is unavailable, watches the parent
from a daemon thread.

Several worker processes may serve one machine (`WORKERS`): each then sizes its pools
to its share of the CPUs (`cpu_share`), so together they do not oversubscribe them.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Self

PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 1.0
CGROUP = Path("/sys/fs/cgroup")

_processes_sharing = 1  # processes of this service sharing the machine's CPUs


def available_cpus(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may run on: the machine's, fewer when its affinity or its
    container's CPU quota (cgroup v2 `cpu.max`, or v1's CFS quota) allows fewer; 2 when
    nothing can be read."""
    count = os.cpu_count() or 2
    if hasattr(os, "sched_getaffinity"):
        count = min(count, len(os.sched_getaffinity(0)) or count)
    quota = _cpu_quota(cgroup)
    return max(1, min(count, math.ceil(quota))) if quota else count


def _cpu_quota(cgroup: Path) -> float | None:
    """The container's CPU quota in CPUs (None: none set, or none readable)."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def share_cpus(processes: int) -> None:
    """This process is one of `processes` serving the machine (set once, at its start)."""
    global _processes_sharing
    _processes_sharing = max(1, processes)


def cpu_share() -> int:
    """The CPUs this process may keep busy: the machine's (`available_cpus`), divided
    among the processes serving it (at least one)."""
    return max(1, available_cpus() // _processes_sharing)


def end_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Make this process receive `sig` when `parent_pid` ends (SIGKILL: it ends too)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before prctl took hold
                    os.kill(os.getpid(), sig)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), sig)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _start(parent_pid: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    end_with_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def spawn_executor(
    workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A process pool of `workers` spawned processes (never forked: the service has threads)
    that end when this process ends, however it ends."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start,
        initargs=(os.getpid(), initializer, initargs),
    )


class LazyProcessPool:
    """Spawned workers started on first use, started afresh after one dies, and stopped
    at shutdown: the lifecycle every pool of this service shares (decoders, prosody,
    the grammar pass). `initargs` may be a callable, evaluated when the workers start
    (it may be slow: `start` runs it, in a thread if the caller wants)."""

    def __init__(self, workers: int, name: str, *, initializer: Callable[..., Any] | None = None,
                 initargs: tuple | Callable[[], tuple] = ()) -> None:
        self.workers, self.name = workers, name
        self._initializer, self._initargs = initializer, initargs
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                args = self._initargs() if callable(self._initargs) else self._initargs
                self._executor = spawn_executor(self.workers, self._initializer, args)
                from loguru import logger

                logger.info(f"{self.name}: {self.workers} worker process(es)")
            return self._executor

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` in a worker; a dead worker raises BrokenProcessPool once, and
        the next call starts fresh ones."""
        import asyncio
        from concurrent.futures.process import BrokenProcessPool

        executor = self.start()
        try:
            return await asyncio.wrap_future(executor.submit(function, *args))
        except BrokenProcessPool:
            self.discard(executor)
            raise

    def discard(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
        executor.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        return self._executor is not None

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


class ProcessWide:
    """One instance per process and class, made on first use (`shared`), and listed once
    made (`started`) so the service can stop its workers at shutdown."""

    _instances: ClassVar[dict[type, Any]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def shared(cls) -> Self:
        with ProcessWide._instances_lock:
            if cls not in ProcessWide._instances:
                ProcessWide._instances[cls] = cls()
            return ProcessWide._instances[cls]

    @classmethod
    def started(cls) -> list[Self]:
        with ProcessWide._instances_lock:
            found = ProcessWide._instances.get(cls)
        return [found] if found is not None else []
