"""The database supervisor: notices an outage, restarts a dead embedded server, backs off
from an external one, and is healthy again only once the spool is replayed."""

from dataclasses import dataclass, field

import pytest

from config.service import StorageSettings
from db.supervisor import DatabaseSupervisor

LIMITS = StorageSettings(db_check_interval_s=1.0, db_reconnect_max_backoff_s=8.0)


@dataclass
class FakeDatabase:
    """Answers pings as scripted: None (ok) or a reason; the server is alive unless killed."""

    embedded: bool = True
    answers: list[str | None] = field(default_factory=list)
    server_up: bool = True
    restart_works: bool = True
    restarts: int = 0
    refreshed: int = 0

    async def probe(self, timeout: float | None = None) -> str | None:
        if not self.server_up:
            return "ConnectionRefusedError"
        return self.answers.pop(0) if self.answers else None

    async def server_alive(self) -> bool:
        return self.server_up

    async def restart_server(self) -> None:
        self.restarts += 1
        if not self.restart_works:
            raise RuntimeError("pg_ctl start failed")
        self.server_up = True

    async def refresh_connections(self) -> None:
        self.refreshed += 1


@dataclass
class FakeWriter:
    spilled: int = 0
    replay_complete: bool = True
    replays: int = 0
    pending: int = 0  # records waiting in the spool

    async def replay_spool(self) -> int:
        self.replays += 1
        applied, self.pending = self.pending, 0
        return applied


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def supervisor(db: FakeDatabase, writer: FakeWriter, clock: Clock) -> DatabaseSupervisor:
    return DatabaseSupervisor(db, writer, LIMITS, clock=clock)


async def test_a_healthy_database_is_checked_every_interval_and_left_alone(clock):
    db, writer = FakeDatabase(), FakeWriter()
    watcher = supervisor(db, writer, clock)

    delay = await watcher.check()

    assert delay == 1.0 and watcher.state == "ok"
    assert (db.restarts, db.refreshed, writer.replays, watcher.outages) == (0, 0, 0, 0)


async def test_a_dead_embedded_server_is_restarted_and_the_spool_replayed_before_ok(clock):
    db, writer = FakeDatabase(server_up=False), FakeWriter(pending=7)
    watcher = supervisor(db, writer, clock)

    await watcher.check()
    after_restart = watcher.status()
    clock.now += 1.0
    await watcher.check()

    assert after_restart.state == "recovering" and after_restart.reason == "ConnectionRefusedError"
    assert db.restarts == 1 and watcher.restarts == 1 and watcher.outages == 1
    assert watcher.state == "ok" and watcher.reason is None
    assert db.refreshed == 1 and writer.replays == 1 and watcher.replayed == 7


async def test_a_frozen_embedded_server_is_waited_for_not_restarted(clock):
    db = FakeDatabase(answers=["no answer within 1 s"] * 3)
    watcher = supervisor(db, FakeWriter(), clock)

    delays = [await watcher.check() for _ in range(3)]
    degraded = watcher.status()
    await watcher.check()  # thawed

    assert delays == [1.0, 1.0, 1.0] and db.restarts == 0
    assert degraded.state == "degraded" and degraded.reason == "no answer within 1 s"
    assert watcher.state == "ok" and watcher.outages == 1


async def test_a_failed_restart_is_retried_with_a_doubling_backoff(clock):
    db = FakeDatabase(server_up=False, restart_works=False)
    watcher = supervisor(db, FakeWriter(), clock)

    attempts_at = []
    for _ in range(8):
        before = db.restarts
        await watcher.check()
        if db.restarts > before:
            attempts_at.append(clock.now - 100.0)
        clock.now += 1.0

    assert attempts_at == [0.0, 1.0, 3.0, 7.0]  # waits of 1, 2 then 4 s between attempts
    assert watcher.state == "recovering" and watcher.restarts == 0


async def test_an_external_database_is_reconnected_with_an_exponential_backoff(clock):
    db = FakeDatabase(embedded=False, answers=["ConnectionRefusedError"] * 6)
    watcher = supervisor(db, FakeWriter(), clock)

    delays = [await watcher.check() for _ in range(6)]
    await watcher.check()

    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]  # capped at DB_RECONNECT_MAX_BACKOFF_S
    assert db.restarts == 0 and watcher.state == "ok" and db.refreshed == 1


async def test_it_stays_recovering_until_a_replay_gets_through_the_whole_spool(clock):
    db, writer = FakeDatabase(answers=["ConnectionResetError"]), FakeWriter(pending=3)
    watcher = supervisor(db, writer, clock)
    await watcher.check()

    writer.replay_complete = False  # the database failed again mid-replay
    await watcher.check()
    halfway = watcher.state
    writer.replay_complete = True
    await watcher.check()

    assert halfway == "recovering" and watcher.state == "ok" and writer.replays == 2


async def test_records_spilled_while_healthy_are_replayed_at_the_next_check(clock):
    db, writer = FakeDatabase(), FakeWriter()
    watcher = supervisor(db, writer, clock)
    await watcher.check()

    writer.spilled, writer.pending = 2, 2  # a batch kept failing on its own
    await watcher.check()
    await watcher.check()

    assert writer.replays == 1 and watcher.replayed == 2 and watcher.state == "ok"


async def test_the_status_says_how_long_the_database_has_been_down(clock):
    watcher = supervisor(FakeDatabase(answers=["TimeoutError"] * 2), FakeWriter(), clock)

    await watcher.check()
    clock.now += 4.0
    await watcher.check()

    assert watcher.status().as_dict() == {
        "state": "degraded", "reason": "TimeoutError", "restarts": 0, "outages": 1,
        "replayed": 0, "down_for_s": 4.0}
