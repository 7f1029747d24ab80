"""The sweeper closes answered calls whose media stream never came (`never_streamed`) and
frees their capacity; it never takes a call that streamed, a fresh one, or another live
pod's; a pass that fails is retried, never raised."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from db import instances, open_calls
from db import repositories as repo
from db.instances import ProcessIdentity
from db.open_calls import Closure
from runner.call_sweeper import CallSweeper, SweepLimits
from tests.db.pools import closed_pool

LIMITS = SweepLimits(interval_s=5.0, never_streamed_after_s=15.0, stale_after_s=60.0,
                     unowned_after_s=1860.0)


async def answered(db, workspace_id: str, owner: str | None, *, age_s: float) -> str:
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="ringing",
        owner_instance=owner)
    await db.pool.execute(
        "UPDATE calls SET created_at = now() - make_interval(secs => $2), started_at = "
        "now() - make_interval(secs => $2) WHERE id = $1",
        uuid.UUID(call_id), age_s)
    return call_id


@pytest.fixture
async def here(db) -> ProcessIdentity:
    identity = ProcessIdentity.current(f"sweeper-{uuid.uuid4().hex[:8]}")
    await instances.register(db.pool, identity)
    return identity


async def test_an_answered_call_that_never_streamed_is_closed_and_its_hold_dropped(
        db, workspace_id, here, tmp_path):
    other_pod = dataclasses.replace(here, instance_id=f"pod-b-{uuid.uuid4().hex[:6]}",
                                    hostname="pod-b-host")
    await instances.register(db.pool, other_pod)
    stuck = await answered(db, workspace_id, here.instance_id, age_s=20)
    unowned = await answered(db, workspace_id, None, age_s=20)
    just_answered = await answered(db, workspace_id, here.instance_id, age_s=2)
    streaming = await answered(db, workspace_id, here.instance_id, age_s=20)
    await repo.claim_call_for_stream(db.pool, streaming, here.instance_id)
    others = await answered(db, workspace_id, other_pod.instance_id, age_s=20)
    dropped: list[str] = []
    sweeper = CallSweeper(db.pool, here, tmp_path, LIMITS, drop_hold=dropped.append)

    result = await sweeper.sweep()

    assert {stuck, unowned} <= set(result.never_streamed)
    assert not {just_answered, streaming, others} & set(result.never_streamed)
    assert {stuck, unowned} <= set(dropped)
    call = await repo.get_call(db.pool, stuck)
    assert (call["status"], call["completion_reason"]) == ("completed", "never_streamed")
    assert call["ended_at"] is not None
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 uuid.UUID(stuck))
    assert [(e["type"], e["data"]) for e in events] == [
        ("call_ended", {"reason": "never_streamed", "waited_s": 15.0,
                        "closed_by": here.instance_id})]
    for call_id in (just_answered, streaming, others):
        assert (await repo.get_call(db.pool, call_id))["ended_at"] is None


async def test_a_stream_that_arrives_as_the_sweeper_closes_keeps_its_call(db, workspace_id, here):
    call_id = await answered(db, workspace_id, here.instance_id, age_s=20)
    await repo.claim_call_for_stream(db.pool, call_id, here.instance_id)

    closed = await open_calls.close(db.pool, Closure(call_id, "never_streamed",
                                                     only_if_never_streamed=True))

    assert not closed and (await repo.get_call(db.pool, call_id))["ended_at"] is None


async def test_a_failing_sweep_is_logged_and_retried_not_raised(pg_dsn, here, tmp_path):
    sweeper = CallSweeper(await closed_pool(pg_dsn), here, tmp_path, LIMITS,
                          drop_hold=lambda _call: None)

    result = await sweeper.sweep()

    assert result.orphaned == [] and result.never_streamed == []
