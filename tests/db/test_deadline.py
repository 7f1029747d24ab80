"""Database work with a deadline: it holds on a frozen server, and nothing waits on its cleanup."""

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import asyncpg
import pytest

from db.deadline import Budget, DatabaseUnavailable, track_connection, unwinding, within
from db.pool import Database
from tests.db.pools import closed_pool
from tests.db.stall import frozen, service_processes

# How long a test waits for an answer before calling it a hang (the bound under test is
# 0.3 s; the old code answered only when the server was thawed).
GUARD_S = 3.0


@pytest.fixture
async def short_db(settings) -> AsyncIterator[Database]:
    """A Database on the session server whose request, ping and cleanup bounds are short."""
    storage = settings.storage.model_copy(update={
        "db_request_timeout_s": 0.3, "db_ping_timeout_s": 0.3, "db_cleanup_timeout_s": 2.0})
    database = await Database.connect(settings.model_copy(update={"storage": storage}),
                                      min_size=1, max_size=2)
    await database.pool.fetchval("SELECT 1")  # an open, idle connection to freeze
    try:
        yield database
    finally:
        await database.close()


async def answered_within(work: Awaitable[Any], guard_s: float = GUARD_S) -> tuple[Any, float]:
    """(result, seconds taken); fails the test if `work` does not answer within `guard_s`.
    Never cancels it: waiting on a cancel is exactly what can hang."""
    started = time.monotonic()
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=guard_s)
    assert done, f"no answer within {guard_s} s: the bound did not hold"
    return task.result(), time.monotonic() - started


async def until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_a_ping_on_a_frozen_database_says_false_at_its_deadline(short_db, pg_dsn):
    with frozen(await service_processes(pg_dsn)):
        alive, took = await answered_within(short_db.ping(0.3))

    assert alive is False and took < 1.0
    assert await short_db.ping()  # thawed: the pool serves again


async def test_a_transaction_on_a_frozen_database_is_abandoned_at_its_deadline(short_db, pg_dsn):
    async def booking() -> None:
        async with short_db.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT 1")

    with frozen(await service_processes(pg_dsn)):
        try:
            await answered_within(short_db.bounded(booking(), what="booking"))
        except DatabaseUnavailable as error:
            refused = error
        # Its connection was terminated, not reset: it unwinds while the server is frozen.
        unwound = await until(lambda: unwinding() == 0, 1.5)

    assert refused.timed_out and "booking" in str(refused) and "0.3 s" in str(refused)
    assert unwound
    assert await short_db.pool.fetchval("SELECT 1") == 1


async def test_at_the_deadline_the_connections_the_work_holds_are_terminated():
    class Connection:
        terminated = False

        def terminate(self) -> None:
            self.terminated = True

    held, cancelled = Connection(), asyncio.Event()

    async def stuck() -> None:
        await track_connection(held)  # as the pool's setup hook does on acquire
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(DatabaseUnavailable) as raised:
        await within(stuck(), 0.05, what="stuck work")

    assert raised.value.timed_out and held.terminated
    await asyncio.wait_for(cancelled.wait(), 1.0)


async def test_a_caller_that_gives_up_abandons_the_work_too():
    class Connection:
        terminated = False

        def terminate(self) -> None:
            self.terminated = True

    held, started = Connection(), asyncio.Event()

    async def stuck() -> None:
        await track_connection(held)
        started.set()
        await asyncio.sleep(60)

    caller = asyncio.ensure_future(within(stuck(), 30, what="stuck work"))
    await started.wait()
    caller.cancel()
    await asyncio.gather(caller, return_exceptions=True)

    assert held.terminated


async def test_query_errors_are_not_mistaken_for_an_unavailable_database(short_db):
    with pytest.raises(asyncpg.DivisionByZeroError):
        await short_db.bounded(short_db.pool.fetchval("SELECT 1/0"), what="sum")
    with pytest.raises(asyncpg.exceptions.DataError):  # a bad argument, caught client-side
        await short_db.bounded(short_db.pool.fetchval("SELECT $1::int", "x"), what="cast")


async def test_an_unreachable_database_is_unavailable_at_once(pg_dsn):
    pool = await closed_pool(pg_dsn)

    with pytest.raises(DatabaseUnavailable) as raised:
        await answered_within(within(pool.fetchval("SELECT 1"), 5.0, what="read"))

    assert not raised.value.timed_out and raised.value.reason == "InterfaceError"


async def test_steps_sharing_a_budget_get_what_is_left():
    budget = Budget(0.2)
    await asyncio.sleep(0.1)

    assert 0.0 < budget.left() <= 0.1
    await asyncio.sleep(0.15)
    assert budget.left() == 0.0
