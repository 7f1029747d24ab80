"""The call-record writer: off the audio path, retried, spilled, replayed, never duplicated."""

import asyncio
import time
import uuid

import pytest

from config import Settings
from db import repositories as repo
from db.writer import CallRecordWriter, CallUpdate, EventRecord, TurnRecord


@pytest.fixture
async def call_id(db):
    workspace = await repo.create_workspace(db.pool, f"w-{uuid.uuid4().hex[:8]}")
    return await repo.create_call(
        db.pool, workspace_id=workspace["id"], service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="in_progress",
    )


def turn(call_id: str, seq: int) -> TurnRecord:
    return TurnRecord(call_id=call_id, seq=seq, speaker_id="caller", speaker_role="caller", text=f"line {seq}")


async def count(db, table: str, call_id: str) -> int:
    return await db.pool.fetchval(f"SELECT count(*) FROM {table} WHERE call_id = $1", uuid.UUID(call_id))


class FlakyPool:
    """A pool whose first `failures` acquisitions fail like a dropped connection."""

    def __init__(self, pool, failures: int) -> None:
        self._pool, self.failures = pool, failures

    def acquire(self, **kwargs):
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionResetError("connection lost")
        return self._pool.acquire(**kwargs)


class DeadPool:
    def acquire(self, **kwargs):
        raise ConnectionRefusedError("database is down")


async def test_records_are_written_in_the_background_and_flushed(db, settings, call_id):
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    for seq in range(1, 6):
        writer.submit(turn(call_id, seq))
    writer.submit(EventRecord(call_id=call_id, seq=1, type="call_started", data={"mode": "phone"}))
    writer.submit(CallUpdate(call_id=call_id, fields={"status": "completed"}))
    assert await writer.flush(5)
    await writer.close(1)
    assert await count(db, "turns", call_id) == 5
    assert (await repo.get_call(db.pool, call_id))["status"] == "completed"


async def test_a_db_hiccup_is_retried_and_nothing_is_duplicated(db, settings, call_id):
    writer = CallRecordWriter(FlakyPool(db.pool, failures=2), settings)
    await writer.start()
    writer.submit(turn(call_id, 1))
    writer.submit(turn(call_id, 1))  # a repeat of the same record is harmless
    assert await writer.flush(10)
    await writer.close(1)
    assert writer.retried == 2 and writer.spilled == 0
    assert await count(db, "turns", call_id) == 1


async def test_submit_never_blocks_while_the_database_is_down(db, tmp_path, call_id):
    settings = Settings(_env_file=None, data_dir=tmp_path, db_write_retries=1, db_write_timeout_s=0.2)
    writer = CallRecordWriter(DeadPool(), settings)
    await writer.start()
    started = time.perf_counter()
    for seq in range(1, 201):
        writer.submit(turn(call_id, seq))
    assert time.perf_counter() - started < 0.05
    await writer.close(timeout=3)


async def test_records_that_cannot_be_written_are_spilled_then_replayed_without_loss(db, tmp_path, call_id):
    settings = Settings(_env_file=None, data_dir=tmp_path, db_write_retries=1, db_write_timeout_s=0.2)
    down = CallRecordWriter(DeadPool(), settings)
    await down.start()
    for seq in range(1, 4):
        down.submit(turn(call_id, seq))
    assert await down.flush(5)
    await down.close(1)
    assert down.spilled == 3 and list((tmp_path / "spool").glob("spool-*.jsonl"))
    assert await count(db, "turns", call_id) == 0

    back = CallRecordWriter(db.pool, settings)
    assert await back.replay_spool() == 3
    assert await back.replay_spool() == 0  # the spool file is gone once applied
    assert await count(db, "turns", call_id) == 3


async def test_a_record_the_database_rejects_is_kept_aside_not_retried_forever(db, tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, db_write_retries=3)
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    writer.submit(turn(str(uuid.uuid4()), 1))  # no such call: a foreign-key violation
    assert await writer.flush(5)
    await writer.close(1)
    assert writer.spilled == 1 and writer.retried == 0
    assert await writer.replay_spool() == 0
    assert (tmp_path / "spool" / "rejected.jsonl").exists()


async def test_closing_with_the_database_down_spills_whatever_is_still_queued(db, tmp_path, call_id):
    settings = Settings(_env_file=None, data_dir=tmp_path, db_write_retries=50, db_write_timeout_s=1)
    writer = CallRecordWriter(DeadPool(), settings)
    await writer.start()
    for seq in range(1, 11):
        writer.submit(turn(call_id, seq))
    await asyncio.sleep(0.05)
    await writer.close(timeout=0.2)
    spooled = sum(len(p.read_text().splitlines()) for p in (tmp_path / "spool").glob("spool-*.jsonl"))
    assert spooled == 10
