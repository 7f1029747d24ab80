"""Keeps the database usable without a process restart: notices, restarts, reconnects, replays.

One background task pings the database (bounded, `DB_PING_TIMEOUT_S`) every
`DB_CHECK_INTERVAL_S`. When a ping fails the database is `degraded`: an embedded server
whose postmaster died is restarted (`recovering`), a frozen one is waited for, and an
external `DATABASE_URL` is retried with a backoff doubling up to
`DB_RECONNECT_MAX_BACKOFF_S`. Once a ping succeeds again the pool's connections are
replaced and the record writer's spool is replayed; only then is the database `ok`.
Records the writer spills while the database is up (a batch that kept failing) are
replayed at the next healthy check.

Log lines name states, reasons (error classes) and counts, never call content.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from loguru import logger

from config.service import StorageSettings

State = Literal["ok", "degraded", "recovering"]


class SupervisedDatabase(Protocol):
    """What the supervisor needs of `db.pool.Database`."""

    @property
    def embedded(self) -> bool: ...

    async def probe(self, timeout: float | None = None) -> str | None: ...

    async def server_alive(self) -> bool: ...

    async def restart_server(self) -> None: ...

    async def refresh_connections(self) -> None: ...


class SpoolingWriter(Protocol):
    """What the supervisor needs of `db.writer.CallRecordWriter`."""

    spilled: int
    replay_complete: bool

    async def replay_spool(self) -> int: ...


@dataclass
class SupervisorStatus:
    """What /health shows about the database's life so far."""

    state: State
    reason: str | None
    restarts: int
    outages: int
    replayed: int
    down_for_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state, "reason": self.reason, "restarts": self.restarts,
            "outages": self.outages, "replayed": self.replayed,
            "down_for_s": None if self.down_for_s is None else round(self.down_for_s, 1),
        }


class DatabaseSupervisor:
    """Watches one database; `check` is one step, `start` runs the steps in the background."""

    def __init__(
        self, db: SupervisedDatabase, writer: SpoolingWriter, limits: StorageSettings, *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._writer = writer
        self._interval_s = limits.db_check_interval_s
        self._max_backoff_s = limits.db_reconnect_max_backoff_s
        self._clock = clock
        self.state: State = "ok"
        self.reason: str | None = None
        self.restarts = 0
        self.outages = 0
        self.replayed = 0
        self._failures = 0  # consecutive failed checks
        self._restart_failures = 0
        self._next_restart_at = 0.0
        self._down_since: float | None = None
        self._spilled_seen = writer.spilled
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- Public ------------------------------------------------------------------

    def status(self) -> SupervisorStatus:
        down = None if self._down_since is None else self._clock() - self._down_since
        return SupervisorStatus(self.state, self.reason, self.restarts, self.outages,
                                self.replayed, down)

    def nudge(self) -> None:
        """Check now rather than at the next tick (someone saw the database fail or
        answer again)."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="database-supervisor")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def check(self) -> float:
        """One step: ping, and react. Returns the seconds until the next step."""
        reason = await self._db.probe()
        if reason is None:
            await self._healthy()
            return self._interval_s
        return await self._unhealthy(reason)

    # --- Steps ---------------------------------------------------------------------

    async def _healthy(self) -> None:
        if self.state != "ok":
            self.state = "recovering"
            await self._db.refresh_connections()
            if not await self._replay():
                return  # the database failed again mid-replay: the next check retries
            down_s = self._clock() - (self._down_since or self._clock())
            logger.info(f"database healthy again after {down_s:.1f} s "
                        f"(restarts so far: {self.restarts})")
            self.state, self.reason, self._down_since = "ok", None, None
            self._failures = self._restart_failures = 0
        elif self._writer.spilled != self._spilled_seen:
            await self._replay()

    async def _unhealthy(self, reason: str) -> float:
        self._failures += 1
        self.reason = reason
        if self.state == "ok":
            self.state = "degraded"
            self.outages += 1
            self._down_since = self._clock()
            logger.error(f"database unavailable ({reason}); calls go on, records spill to disk")
        if self._db.embedded:
            if not await self._db.server_alive():
                await self._restart()
            return self._interval_s
        delay = min(self._max_backoff_s, self._interval_s * 2 ** (self._failures - 1))
        logger.warning(f"database still unavailable ({reason}); reconnecting in {delay:.1f} s")
        return delay

    async def _restart(self) -> None:
        """Restart the embedded server, no sooner than the restart backoff allows."""
        if self._clock() < self._next_restart_at:
            return
        self.state = "recovering"
        logger.warning("embedded PostgreSQL is not running; restarting it")
        try:
            await self._db.restart_server()
        except Exception as error:  # noqa: BLE001 - retried with a backoff
            self._restart_failures += 1
            delay = min(self._max_backoff_s, self._interval_s * 2 ** (self._restart_failures - 1))
            self._next_restart_at = self._clock() + delay
            logger.error(f"embedded PostgreSQL restart failed ({type(error).__name__}); "
                         f"next attempt in {delay:.1f} s")
            return
        self.restarts += 1
        logger.warning(f"embedded PostgreSQL restarted (restarts so far: {self.restarts})")

    async def _replay(self) -> bool:
        """Replay the writer's spool; True when the replay got through all of it."""
        self._spilled_seen = self._writer.spilled
        try:
            replayed = await self._writer.replay_spool()
        except Exception as error:  # noqa: BLE001 - the spool stays for the next check
            logger.error(f"spool replay failed ({type(error).__name__})")
            return False
        self.replayed += replayed
        return self._writer.replay_complete

    async def _run(self) -> None:
        while True:
            try:
                delay = await self.check()
            except Exception as error:  # noqa: BLE001 - the supervisor outlives any one check
                logger.error(f"database check failed unexpectedly ({type(error).__name__})")
                delay = self._interval_s
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                pass
