"""Runs the durable job queue's jobs in this process (`db/jobs.py` queues them).

Each kind of job names its handler and its retry policy: a handler that raises is run
again after a backoff (1 s, 2 s, 4 s … up to `max_delay`) until its attempts are spent,
then held as `failed` for a person to retry. Every process runs one worker; the queue
hands each job to exactly one of them, and a job whose worker died (its heartbeat went
stale) goes to another. A periodic kind is one job across every process: each worker
queues it at start (skipped while it is queued or running), and each run queues it
again for `every` later, even when it failed, so it survives restarts and never stops.
The worker has its own connection (it listens for new jobs); when that connection drops
it reconnects with a backoff, and no call waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from loguru import logger
from pgqueuer import (
    AsyncpgDriver,
    DatabaseRetryEntrypointExecutor,
    Job,
    Queries,
    QueueManager,
    RetryRequested,
)
from pgqueuer.core.executors import EntrypointExecutorParameters

from db.jobs import decode, enqueue
from db.pool import init_connection

Handler = Callable[[dict[str, Any]], Awaitable[None]]

HEARTBEAT_TIMEOUT = timedelta(seconds=20)  # a job unbeaten this long goes to another worker
DEQUEUE_TIMEOUT = timedelta(seconds=5)  # the longest a new job waits without a NOTIFY
RECONNECT_MAX_S = 30.0
CONNECT_TIMEOUT_S = 10.0
CANCEL_WAIT_S = 2.0
APPLICATION = "job-worker"  # the worker's connection, as pg_stat_activity names it


@dataclass(frozen=True)
class JobKind:
    """One kind of job: its entrypoint name, handler and retry policy."""

    entrypoint: str
    handler: Handler
    max_attempts: int = 5
    initial_delay: timedelta = timedelta(seconds=1)
    max_delay: timedelta = timedelta(minutes=5)
    concurrency_limit: int = 0  # across every worker; 0: no limit
    every: timedelta | None = None  # periodic: run again this long after each run


def periodic_key(entrypoint: str) -> str:
    """The dedupe key that keeps one job of a periodic kind across every process."""
    return f"periodic:{entrypoint}"


class JobWorker:
    def __init__(self, dsn: str, kinds: Mapping[str, JobKind], *, batch_size: int = 5,
                 heartbeat_timeout: timedelta = HEARTBEAT_TIMEOUT,
                 dequeue_timeout: timedelta = DEQUEUE_TIMEOUT) -> None:
        self._dsn = dsn
        self.kinds = dict(kinds)
        self._batch_size = batch_size
        self._heartbeat_timeout = heartbeat_timeout
        self._dequeue_timeout = dequeue_timeout
        self._task: asyncio.Task | None = None
        self._manager: QueueManager | None = None
        self._stopping = asyncio.Event()
        self.running = asyncio.Event()  # set while a queue manager is dequeuing

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._run_forever(), name="job-worker")
        return self._task

    async def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs; running ones finish (or, past `timeout`, are cut off and
        picked again by a worker of another process once their heartbeat is stale)."""
        self._stopping.set()
        if self._manager is not None:
            self._manager.shutdown.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            if not self._task.done():
                # Cut off; the library's buffers may keep retrying a flush to a dead
                # database, so the wait for the cancellation is bounded too.
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=CANCEL_WAIT_S)

    async def _run_forever(self) -> None:
        delay = 1.0
        while not self._stopping.is_set():
            try:
                await self._run_once()
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the queue waits; calls go on
                logger.opt(exception=error).warning(f"job worker stopped ({type(error).__name__}); "
                               f"reconnecting in {delay:.0f} s")
            self.running.clear()
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def _run_once(self) -> None:
        connection = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_S,
                                           server_settings={"application_name": APPLICATION})
        try:
            # The same JSON codecs as the pool's connections, so a job's headers written
            # through the pool read back as the library wrote them.
            await init_connection(connection)
            for kind in self.kinds.values():
                if kind.every is not None:
                    await enqueue(connection, kind.entrypoint, {},
                                  dedupe_key=periodic_key(kind.entrypoint))
            manager = QueueManager(Queries(AsyncpgDriver(connection)))
            for kind in self.kinds.values():
                self._register(manager, kind)
            self._manager = manager
            if self._stopping.is_set():
                return
            self.running.set()
            await manager.run(
                dequeue_timeout=self._dequeue_timeout, batch_size=self._batch_size,
                heartbeat_timeout=self._heartbeat_timeout, shutdown_on_listener_failure=True,
            )
        finally:
            self._manager = None
            with contextlib.suppress(Exception):
                await connection.close(timeout=2.0)

    @staticmethod
    def _register(manager: QueueManager, kind: JobKind) -> None:
        def executor(parameters: EntrypointExecutorParameters) -> DatabaseRetryEntrypointExecutor:
            return DatabaseRetryEntrypointExecutor(
                parameters=parameters, max_attempts=kind.max_attempts,
                initial_delay=kind.initial_delay, max_delay=kind.max_delay)

        async def run(job: Job) -> None:
            if kind.every is None:
                await kind.handler(decode(job.payload))
                return
            try:
                await kind.handler(decode(job.payload))
            except Exception as error:  # noqa: BLE001 - the next run tries again
                logger.opt(exception=error).warning(
                    f"periodic job {kind.entrypoint} failed ({type(error).__name__}); "
                    f"next run in {kind.every}")
            raise RetryRequested(delay=kind.every, reason="periodic")

        manager.entrypoint(kind.entrypoint, concurrency_limit=kind.concurrency_limit,
                           on_failure="hold", executor_factory=executor)(run)
