"""Worker processes that live and die with the service process.

The offline decoders and the prosody analyzer run in spawned worker processes. A
`ProcessPoolExecutor` worker whose parent is killed (SIGKILL, a crash, an operator's
`kill -9`) does not notice: it sleeps on its task queue for ever, holding its memory
(~90 MB each). Every worker started here asks the kernel to end it when its parent
goes (Linux `PR_SET_PDEATHSIG`) and, where that is unavailable, watches the parent
from a daemon thread.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ClassVar, Self

PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 1.0


def _end_with_parent(parent_pid: int) -> None:
    """Make this process end when `parent_pid` does."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before prctl took hold
                    os._exit(0)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _start(parent_pid: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    _end_with_parent(parent_pid)
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
