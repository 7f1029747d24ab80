"""A call answered by one worker process of a machine and streamed in another: the
profile the answer resolved travels with the call, the machine's lines are one count
whichever process holds them, and only the process running the call takes it over."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from config import Settings
from db import repositories as repo
from db.graph_store import save_graph
from flows.graph import bundled_graph
from lib.shared_slots import SharedSlots
from ops.commands import OperatorAction, OperatorCommand
from ops.registry import ActiveCall
from runner.box import WorkerPlace
from runner.runtime import AppRuntime, line_slots


@pytest.fixture
async def machine(tmp_path, pg_dsn, db):
    """Two worker processes' runtimes on one machine (one data folder, one set of lines,
    MAX_CONCURRENT_CALLS=3), on the session database."""
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn,
                        max_concurrent_calls=3)
    slots = SharedSlots.shared(2, line_slots(3), lock_dir=tmp_path)
    runtimes = []
    try:
        for index in range(2):
            runtimes.append(await AppRuntime.start(settings, WorkerPlace(
                index=index, count=2, slots=slots, prepared=True)))
        yield runtimes
    finally:
        for runtime in runtimes:
            await runtime.close()


@pytest.fixture
async def clinic_with_its_own_graph(db) -> str:
    """A clinic's number; its workspace runs a stored version (7) of the booking graph."""
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    number = f"+1555020{uuid.uuid4().int % 10000:04d}"
    await repo.create_service(db.pool, workspace["id"], "Handover Clinic", phone_number=number,
                              keyterms=["Okafor"])
    await save_graph(db.pool, workspace["id"], {
        **bundled_graph("clinic_booking").model_dump(mode="json"), "version": 7})
    return number


async def test_a_call_answered_in_one_worker_runs_in_another_exactly_as_answered(
        machine, db, clinic_with_its_own_graph):
    answering, streaming = machine
    call_id = str(uuid.uuid4())
    profile = await answering.resolve_profile(call_id, clinic_with_its_own_graph)
    await repo.create_call(
        db.pool, workspace_id=profile.workspace_id, service_id=profile.service_id,
        call_sid=None, direction="inbound", from_number="+15550100999",
        to_number=clinic_with_its_own_graph, status="ringing",
        config_snapshot=answering.snapshot(profile), call_id=call_id,
        owner_instance=answering.identity.instance_id,
        stream_setup=answering.stream_setup(profile))
    answering.remember_profile(profile)
    assert streaming.calls_in_hand() == 1  # the answered call holds a line of the machine

    claimed = await repo.claim_call_for_stream(db.pool, call_id,
                                               streaming.identity.instance_id)
    assert streaming.take_profile(call_id) is None  # it did not answer the call
    restored = await streaming.restore_profile(call_id, claimed["stream_setup"])

    assert answering.calls_in_hand() == 0  # the answer's hold is let go by the stream
    assert restored.graph is not None and restored.graph is not profile.graph
    assert (restored.graph.id, restored.graph.version) == ("clinic_booking", 7)
    assert streaming.snapshot(restored) == answering.snapshot(profile)
    for field in ("workspace_id", "service_id", "clinic_name", "greeting", "keyterms",
                  "voice", "dialled_number", "after_hours", "graph_problems"):
        assert getattr(restored, field) == getattr(profile, field), field
    assert "Okafor" in restored.keyterms
    # The set-up went with the stream: a second claim gets nothing, and nothing is kept.
    assert await repo.claim_call_for_stream(db.pool, call_id) is None
    assert await db.pool.fetchval(
        "SELECT count(*) FROM call_stream_setups WHERE call_id = $1", uuid.UUID(call_id)) == 0


def a_call() -> asyncio.Task:
    return asyncio.create_task(asyncio.Event().wait())


async def test_the_machines_lines_are_one_count_whichever_worker_holds_them(machine):
    first, second = machine
    first.call_running("call-a", a_call())
    second.hold_ringing("attempt-1")  # an outbound call dialled by the other worker
    assert first.calls_in_hand() == second.calls_in_hand() == 2
    assert first.outbound_has_room() is False  # 3 lines, 2 reserved for callers
    first.release_ringing("attempt-1")  # answered in the first worker
    assert second.calls_in_hand() == 1
    second.call_running("call-b", a_call())
    second.call_running("call-c", a_call())
    assert not first.has_capacity() and not second.has_capacity()
    first.call_done("call-a")
    assert second.has_capacity()


async def test_an_operator_in_one_worker_reaches_a_call_running_in_another(machine):
    here, there = machine
    assert here.ops.shared and here.ops.pod_id != there.ops.pod_id
    received: list[OperatorCommand] = []

    async def apply(command: OperatorCommand) -> None:
        received.append(command)

    there.ops.registry.add(ActiveCall("call-x", "w-x", None, there.ops.pod_id, time.time()))
    there.ops.bus.handle_commands("call-x", apply, workspace_id="w-x")
    deadline = time.monotonic() + 5
    while (entry := await here.ops.registry.get("call-x")) is None:
        assert time.monotonic() < deadline, "the other worker's call was never listed"
        await asyncio.sleep(0.05)

    end = OperatorCommand("call-x", "w-x", OperatorAction.END)
    assert entry.pod_id == there.ops.pod_id
    assert await here.ops.bus.send_command(entry.pod_id, end)
    assert received == [end]
