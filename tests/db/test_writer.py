"""The call-record writer: off the audio path, retried, spilled, replayed, never duplicated."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru import logger

from db import repositories as repo
from db.pool import Database
from db.writer import (
    CallRecordWriter,
    CallUpdate,
    EventRecord,
    ToolCallRecord,
    TransitionRecord,
    TurnedAwayCall,
    TurnRecord,
)
from tests.db.pools import FlakyPool, GatedPool, HangingPool, closed_pool
from tests.db.stall import frozen, service_processes

MakeWriter = Callable[..., CallRecordWriter]


@pytest.fixture
async def make_writer(settings) -> AsyncIterator[MakeWriter]:
    """Writers with fast backoff on this test's data dir; closed at teardown."""
    writers: list[CallRecordWriter] = []

    def make(pool, *, retries: int = 2, timeout: float = 0.5, **options) -> CallRecordWriter:
        storage = settings.storage.model_copy(
            update={"db_write_retries": retries, "db_write_timeout_s": timeout}
        )
        tuned = settings.model_copy(update={"storage": storage})
        writer = CallRecordWriter(pool, tuned, backoff_s=0.01, **options)
        writers.append(writer)
        return writer

    yield make
    for writer in writers:
        await writer.close(timeout=0.1)


def turn(call_id: str, seq: int, text: str | None = None) -> TurnRecord:
    return TurnRecord(
        call_id=call_id, seq=seq, speaker_id="caller", speaker_role="caller",
        text=text or f"line {seq}",
    )


async def turn_seqs(db, call_id: str) -> list[int]:
    rows = await db.pool.fetch(
        "SELECT seq FROM turns WHERE call_id = $1::uuid ORDER BY seq", call_id
    )
    return [row["seq"] for row in rows]


def spool_lines(data_dir: Path, pattern: str = "spool-*.jsonl") -> int:
    return sum(len(p.read_text().splitlines()) for p in (data_dir / "spool").glob(pattern))


async def test_records_of_every_kind_are_written_in_the_background_and_flushed(
    db, call_id, make_writer
):
    writer = make_writer(db.pool)
    ended = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    await writer.start()

    for seq in (1, 2, 3):
        writer.submit(turn(call_id, seq))
    writer.submit(TransitionRecord(call_id=call_id, seq=1, next_state="greeting"))
    writer.submit(ToolCallRecord(call_id=call_id, tool_call_id="tc-1", name="find_slots",
                                 input={"day": "monday"}, succeeded=True))
    writer.submit(EventRecord(call_id=call_id, seq=1, type="call_started", data={"mode": "phone"}))
    writer.submit(CallUpdate(call_id=call_id, fields={"status": "completed", "ended_at": ended}))
    flushed = await writer.flush(5)

    detail = await repo.get_call_detail(db.pool, call_id, await _workspace_of(db, call_id))
    assert flushed and writer.written == 7 and writer.spilled == 0
    assert [t["seq"] for t in detail["turns"]] == [1, 2, 3]
    assert detail["transitions"][0]["next_state"] == "greeting"
    assert detail["tool_calls"][0]["input"] == {"day": "monday"}
    assert detail["events"][0]["data"] == {"mode": "phone"}
    assert detail["status"] == "completed" and datetime.fromisoformat(detail["ended_at"]) == ended


async def _workspace_of(db, call_id: str) -> str:
    return (await repo.get_call(db.pool, call_id))["workspace_id"]


async def test_a_dropped_connection_is_retried_and_repeats_are_not_duplicated(
    db, call_id, make_writer
):
    writer = make_writer(FlakyPool(db.pool, failures=2), retries=3)
    writer.submit(turn(call_id, 1))
    writer.submit(turn(call_id, 1))  # the same record twice is harmless

    await writer.start()
    flushed = await writer.flush(5)

    assert flushed and writer.retried == 2 and writer.spilled == 0
    assert await turn_seqs(db, call_id) == [1]


async def test_an_outage_is_retried_then_spilled_then_replayed_without_loss_or_duplicates(
    db, pg_dsn, call_id, settings, make_writer
):
    live = make_writer(db.pool)
    await live.start()
    for seq in (1, 2):
        live.submit(turn(call_id, seq))
    await live.flush(5)
    down = make_writer(await closed_pool(pg_dsn), retries=2)
    ended = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
    for seq in (2, 3, 4):  # seq 2 reached the database before the outage
        down.submit(turn(call_id, seq))
    down.submit(CallUpdate(call_id=call_id, fields={"status": "completed", "ended_at": ended}))

    await down.start()
    flushed = await down.flush(5)
    during_outage = await turn_seqs(db, call_id)
    back = make_writer(db.pool)
    replayed = await back.replay_spool()
    replayed_again = await back.replay_spool()

    call = await repo.get_call(db.pool, call_id)
    assert flushed and down.retried == 2 and down.spilled == 4 and down.written == 0
    assert during_outage == [1, 2]
    assert replayed == 4 and replayed_again == 0
    assert await turn_seqs(db, call_id) == [1, 2, 3, 4]
    assert call["status"] == "completed" and datetime.fromisoformat(call["ended_at"]) == ended
    assert spool_lines(settings.storage.data_dir, "*-*.jsonl") == 0


async def test_a_database_that_hangs_costs_one_timeout_per_attempt_then_spills(
    call_id, make_writer
):
    hanging = HangingPool()
    writer = make_writer(hanging, retries=1, timeout=0.1)
    writer.submit(turn(call_id, 1))

    started = time.perf_counter()
    await writer.start()
    flushed = await writer.flush(3)
    elapsed = time.perf_counter() - started

    assert flushed and hanging.attempts == 2 and writer.spilled == 1
    assert elapsed < 1.0


async def test_a_frozen_database_costs_bounded_attempts_then_spills_and_nothing_is_lost(
    db, pg_dsn, call_id, settings, make_writer
):
    stalled = await Database.connect(settings, min_size=1, max_size=2)
    await stalled.pool.fetchval("SELECT 1")  # an idle connection, frozen with its server
    writer = make_writer(stalled.pool, retries=1, timeout=0.3)
    await writer.start()
    try:
        with frozen(await service_processes(pg_dsn)):
            for seq in (1, 2, 3):
                writer.submit(turn(call_id, seq))
            started = time.perf_counter()
            flushed = await writer.flush(4.0)
            elapsed = time.perf_counter() - started
        spilled = writer.spilled
        replayed = await writer.replay_spool()
    finally:
        await writer.close(timeout=1)
        await stalled.close()

    assert flushed and elapsed < 2.0  # two attempts of 0.3 s, not the length of the stall
    assert spilled == 3 and replayed == 3
    assert await turn_seqs(db, call_id) == [1, 2, 3]


async def test_submit_never_blocks_or_raises_while_the_database_hangs(call_id, make_writer):
    writer = make_writer(HangingPool(), retries=5, timeout=10)
    await writer.start()

    started = time.perf_counter()
    for seq in range(1, 2001):
        writer.submit(turn(call_id, seq))
    writer.submit("not a record")  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started

    assert elapsed < 0.1
    assert writer.pending == 2000


async def test_a_full_queue_spills_to_disk_instead_of_dropping_and_replay_restores_it(
    db, call_id, make_writer
):
    writer = make_writer(db.pool, queue_limit=10)
    for seq in range(1, 26):
        writer.submit(turn(call_id, seq))
    spilled_at_submit = writer.spilled

    await writer.start()
    await writer.flush(5)
    replayed = await make_writer(db.pool).replay_spool()

    assert spilled_at_submit == 15 and writer.written == 10
    assert replayed == 15
    assert await turn_seqs(db, call_id) == list(range(1, 26))


async def test_flush_waits_only_for_records_submitted_before_it(db, call_id, make_writer):
    gated = GatedPool(db.pool)
    writer = make_writer(gated, batch_size=1, timeout=5)
    await writer.start()
    writer.submit(turn(call_id, 1))
    flushing = asyncio.create_task(writer.flush(5))
    await asyncio.sleep(0)  # the flush takes its mark now
    writer.submit(turn(call_id, 2))
    writer.submit(turn(call_id, 3))

    gated.gate.release()
    first_flush = await flushing
    pending_after_first = writer.pending
    gated.gate.release()
    gated.gate.release()
    second_flush = await writer.flush(5)

    assert first_flush and pending_after_first == 2
    assert second_flush and writer.written == 3


async def test_a_record_the_database_rejects_is_set_aside_and_the_rest_is_written(
    db, call_id, settings, make_writer
):
    writer = make_writer(db.pool, retries=3)
    writer.submit(turn(call_id, 1))
    writer.submit(turn(str(uuid.uuid4()), 1))  # no such call: a foreign-key violation
    writer.submit(turn(call_id, 2))

    await writer.start()
    await writer.flush(5)
    replayed = await writer.replay_spool()

    assert writer.rejected == 1 and writer.retried == 0 and writer.spilled == 0
    assert writer.written == 2 and await turn_seqs(db, call_id) == [1, 2]
    assert replayed == 0 and spool_lines(settings.storage.data_dir, "rejected.jsonl") == 1


async def test_failures_are_logged_without_call_content(db, pg_dsn, call_id, make_writer):
    messages: list[str] = []
    sink = logger.add(messages.append, level="DEBUG", format="{message}")
    try:
        rejecting = make_writer(db.pool)
        rejecting.submit(TurnRecord(call_id=call_id, seq="seven", speaker_id="caller",  # type: ignore[arg-type]
                                    speaker_role="caller", text="Jane Doe, born 1970"))
        down = make_writer(await closed_pool(pg_dsn), retries=1)
        down.submit(EventRecord(call_id=call_id, seq=1, type="caller_id",
                                data={"from": "+15550100123"}))
        await rejecting.start()
        await down.start()
        await rejecting.flush(5)
        await down.flush(5)
    finally:
        logger.remove(sink)

    logged = "\n".join(messages)
    assert rejecting.rejected == 1 and down.spilled == 1
    assert call_id in logged and "TurnRecord" in logged and "EventRecord" in logged
    assert "Jane" not in logged and "1970" not in logged and "+15550100123" not in logged


async def test_closing_while_the_database_hangs_spills_the_queue_and_the_batch_in_flight(
    call_id, settings, make_writer
):
    writer = make_writer(HangingPool(), retries=50, timeout=10, batch_size=4)
    for seq in range(1, 11):
        writer.submit(turn(call_id, seq))
    await writer.start()
    await asyncio.sleep(0.01)

    await writer.close(timeout=0.1)

    assert spool_lines(settings.storage.data_dir) == 10
    assert writer.pending == 0 and writer.spilled == 10


async def test_records_submitted_after_close_are_spilled_not_lost(db, call_id, make_writer):
    writer = make_writer(db.pool)
    await writer.start()
    await writer.close(timeout=1)

    writer.submit(turn(call_id, 1))
    replayed = await make_writer(db.pool).replay_spool()

    assert writer.spilled == 1 and replayed == 1
    assert await turn_seqs(db, call_id) == [1]


async def test_a_replay_during_an_outage_keeps_the_spool_for_the_next_start(
    db, pg_dsn, call_id, settings, make_writer
):
    down = make_writer(await closed_pool(pg_dsn), retries=0)
    for seq in (1, 2, 3):
        down.submit(turn(call_id, seq))
    await down.start()
    await down.flush(5)

    still_down = await make_writer(await closed_pool(pg_dsn)).replay_spool()
    kept = spool_lines(settings.storage.data_dir)
    recovered = await make_writer(db.pool).replay_spool()

    assert still_down == 0 and kept == 3
    assert recovered == 3 and await turn_seqs(db, call_id) == [1, 2, 3]


async def test_a_replayed_older_update_fills_gaps_but_never_rolls_a_call_back(
    db, pg_dsn, call_id, make_writer
):
    connected = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    down = make_writer(await closed_pool(pg_dsn), retries=0)
    down.submit(CallUpdate(call_id=call_id,
                           fields={"status": "in_progress", "connected_at": connected}))
    await down.start()
    await down.flush(5)
    await repo.update_call(db.pool, call_id, status="completed", completion_reason="caller_hangup")

    replayed = await make_writer(db.pool).replay_spool()

    call = await repo.get_call(db.pool, call_id)
    assert replayed == 1
    assert call["status"] == "completed" and call["completion_reason"] == "caller_hangup"
    assert datetime.fromisoformat(call["connected_at"]) == connected


async def test_twilios_status_report_does_not_hold_back_the_calls_own_end(db, call_id, make_writer):
    """The status callback lands while the call's end is still queued: the end still applies."""
    ended = CallUpdate(call_id=call_id, fields={"status": "completed",
                                                "completion_reason": "agent_hangup"})
    await repo.update_call(db.pool, call_id, twilio_status="completed", twilio_duration_s=54)

    writer = make_writer(db.pool)
    await writer.start()
    writer.submit(ended)
    await writer.flush(5)

    call = await repo.get_call(db.pool, call_id)
    assert call["status"] == "completed" and call["completion_reason"] == "agent_hangup"
    assert call["twilio_status"] == "completed" and call["twilio_duration_s"] == 54


def turned_away(workspace_id: str | None, call_sid: str, **fields) -> TurnedAwayCall:
    return TurnedAwayCall(
        call_id=str(uuid.uuid4()), call_sid=call_sid, completion_reason="database_unavailable",
        event="database_unavailable", event_data={"stage": "call lookup"},
        workspace_id=workspace_id, from_number="+15550100123", to_number="+15550100100",
        **fields)


async def _call_and_events(db, call_sid: str) -> tuple[list, list[str]]:
    calls = await db.pool.fetch("SELECT * FROM calls WHERE call_sid = $1", call_sid)
    events = await db.pool.fetch(
        "SELECT e.type FROM call_events e JOIN calls c ON c.id = e.call_id "
        "WHERE c.call_sid = $1 ORDER BY e.seq", call_sid)
    return list(calls), [e["type"] for e in events]


async def test_a_call_turned_away_in_an_outage_is_on_record_once_after_every_replay(
    db, pg_dsn, workspace_id, settings, make_writer
):
    call_sid = "CA" + uuid.uuid4().hex
    record = turned_away(workspace_id, call_sid)
    down = make_writer(await closed_pool(pg_dsn), retries=0)
    down.submit(record)
    down.submit(record)  # spooled twice (e.g. by two processes' retries)
    await down.start()
    await down.flush(5)

    back = make_writer(db.pool)
    replayed = await back.replay_spool()
    back.submit(record)  # and once more, straight to the database
    await back.flush(5)
    calls, events = await _call_and_events(db, call_sid)

    assert down.spilled == 2 and replayed == 2 and back.rejected == 0
    [call] = calls
    assert str(call["id"]) == record.call_id and str(call["workspace_id"]) == workspace_id
    assert call["status"] == "completed" and call["ended_at"] is not None
    assert call["completion_reason"] == "database_unavailable"
    assert call["from_number"] == "+15550100123"
    assert events == ["database_unavailable"]


async def test_a_turned_away_call_whose_row_was_created_after_all_is_closed_by_its_record(
    db, workspace_id, make_writer
):
    call_sid = "CA" + uuid.uuid4().hex
    record = turned_away(workspace_id, call_sid)
    await repo.create_call(  # the insert that timed out for the webhook, yet committed
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=call_sid,
        direction="inbound", from_number=None, to_number=None, status="ringing",
        call_id=record.call_id)
    writer = make_writer(db.pool)
    await writer.start()

    writer.submit(record)
    await writer.flush(5)
    calls, events = await _call_and_events(db, call_sid)

    [call] = calls
    assert call["status"] == "completed" and call["completion_reason"] == "database_unavailable"
    assert events == ["database_unavailable"]


async def test_a_turned_away_answer_for_a_call_already_on_record_leaves_that_call_alone(
    db, call_id, make_writer
):
    call_sid = "CA" + uuid.uuid4().hex
    await db.pool.execute("UPDATE calls SET call_sid = $2 WHERE id = $1",
                          uuid.UUID(call_id), call_sid)
    writer = make_writer(db.pool)
    await writer.start()

    writer.submit(turned_away(None, call_sid))  # Twilio asked again; the lookup failed
    await writer.flush(5)
    calls, events = await _call_and_events(db, call_sid)

    assert writer.rejected == 0 and writer.spilled == 0
    [call] = calls
    assert str(call["id"]) == call_id and call["status"] == "in_progress"
    assert call["completion_reason"] is None and events == []


async def test_a_turned_away_call_of_a_clinic_deleted_meanwhile_is_kept_without_it(
    db, make_writer
):
    call_sid = "CA" + uuid.uuid4().hex
    writer = make_writer(db.pool)
    await writer.start()

    writer.submit(turned_away(str(uuid.uuid4()), call_sid, service_id=str(uuid.uuid4())))
    await writer.flush(5)
    calls, events = await _call_and_events(db, call_sid)

    [call] = calls
    assert call["workspace_id"] is None and call["service_id"] is None
    assert events == ["database_unavailable"] and writer.rejected == 0
