"""Database work with a deadline that holds even when the server is frozen.

`asyncio.wait_for` and `asyncio.timeout` alone do not bound database work: cancelling
a query makes asyncpg wait for the server to acknowledge the cancel and reset the
connection before the pool takes it back, and a frozen server never answers, so the
"timed out" request waits as long as the stall. `within` runs the work in a task of
its own and stops waiting for it at the deadline: the connections the work holds are
terminated (a frozen server cannot reset them), the task is cancelled, and its
unwinding is awaited in the background, bounded, never on the caller's path.

Connections are attributed to the work by the pool's `setup` hook (`track_connection`,
installed by `db.pool.Database.connect`), which runs in the acquiring task's context.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import asyncpg
from asyncpg import exceptions as pg_errors
from loguru import logger

T = TypeVar("T")

DEFAULT_CLEANUP_S = 5.0

# Errors that say the database (not the query) is the problem: unreachable, gone,
# shutting down, starting up, out of connections, or too slow (statement_timeout).
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, asyncpg.InterfaceError, pg_errors.PostgresConnectionError,
    pg_errors.OperatorInterventionError, pg_errors.TooManyConnectionsError,
)
# Interface errors about the query's input or the client, not the database (asyncpg's
# client-side DataError and ClientConfigurationError are ValueErrors).
_NOT_UNAVAILABLE: tuple[type[BaseException], ...] = (
    ValueError, pg_errors.UnsupportedClientFeatureError, pg_errors.UnsupportedServerFeatureError,
)

_held: contextvars.ContextVar[set[Any] | None] = contextvars.ContextVar(
    "db_connections_held", default=None
)
_unwinding: set[asyncio.Task[Any]] = set()


class DatabaseUnavailable(ConnectionError):
    """The database did not answer within the deadline, or cannot be reached now."""

    def __init__(self, what: str, reason: str, *, timed_out: bool) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason
        self.timed_out = timed_out


class Budget:
    """One deadline shared by several steps (a webhook's lookup, then its write): each
    step gets what is left, so the steps together stay within it."""

    def __init__(self, seconds: float) -> None:
        self._ends_at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._ends_at - time.monotonic())


def is_unavailable(error: BaseException) -> bool:
    """Whether `error` means the database cannot serve now (rather than a bad query)."""
    if isinstance(error, DatabaseUnavailable):
        return True
    return isinstance(error, _UNAVAILABLE) and not isinstance(error, _NOT_UNAVAILABLE)


async def track_connection(connection: Any) -> None:
    """Pool `setup` hook: note a connection acquired by work running under `within`."""
    held = _held.get()
    if held is not None:
        held.add(connection)


def unwinding() -> int:
    """Abandoned pieces of work still unwinding in the background."""
    return len(_unwinding)


async def within(
    work: Awaitable[T], timeout_s: float, *, what: str, cleanup_s: float = DEFAULT_CLEANUP_S
) -> T:
    """`work`'s result, or DatabaseUnavailable once `timeout_s` passes or the database
    cannot be reached. Returns at the deadline whatever the server does; `what` names the
    work in messages and logs (never put call content in it)."""
    held: set[Any] = set()
    context = contextvars.copy_context()
    context.run(_held.set, held)
    task = asyncio.get_running_loop().create_task(_as_coroutine(work), name=f"db: {what}",
                                                  context=context)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        _abandon(task, held, what, cleanup_s)
        raise
    if not done:
        _abandon(task, held, what, cleanup_s)
        raise DatabaseUnavailable(what, f"no answer within {timeout_s:g} s", timed_out=True)
    try:
        return task.result()
    except Exception as error:
        if isinstance(error, DatabaseUnavailable) or not is_unavailable(error):
            raise
        raise DatabaseUnavailable(
            what, type(error).__name__, timed_out=isinstance(error, TimeoutError)
        ) from error


async def _as_coroutine(work: Awaitable[T]) -> T:
    return await work


def _abandon(task: asyncio.Task[Any], held: set[Any], what: str, cleanup_s: float) -> None:
    """Stop the work without waiting for it: terminate its connections, cancel it, and
    let it unwind in the background (reported if it is still stuck after `cleanup_s`)."""
    for connection in list(held):
        _terminate(connection)
    task.cancel()
    task.add_done_callback(_consume)
    watcher = asyncio.get_running_loop().create_task(
        _watch(task, what, cleanup_s), name=f"db unwind: {what}"
    )
    _unwinding.add(watcher)
    watcher.add_done_callback(_unwinding.discard)


def _terminate(connection: Any) -> None:
    """Close the socket at once (no reset, no goodbye): a released proxy is skipped."""
    try:
        connection.terminate()
    except asyncpg.InterfaceError:
        pass  # already back in the pool: no longer this work's
    except Exception as error:  # noqa: BLE001 - best effort; the pool replaces it anyway
        logger.warning(f"database connection not terminated ({type(error).__name__})")


async def _watch(task: asyncio.Task[Any], what: str, cleanup_s: float) -> None:
    _, pending = await asyncio.wait({task}, timeout=cleanup_s)
    if pending:
        logger.warning(f"abandoned database work ({what}) still unwinding {cleanup_s:g} s "
                       "after its deadline")
        await asyncio.wait({task})


def _consume(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned task's outcome so it is not reported as never retrieved."""
    if not task.cancelled():
        task.exception()

