"""Hand-offs on record: an outcome is settled once, and a call whose hand-off reached
nobody is opened again for the agent exactly once; one answered never is."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from db import handoffs
from db import repositories as repo


async def a_handed_off_call(db, workspace_id: str) -> tuple[str, handoffs.Handoff]:
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid="CA" + uuid.uuid4().hex,
        direction="inbound", from_number="+15550100999", to_number="+15550100100",
        status="in_progress")
    await db.pool.execute(
        "UPDATE calls SET status = 'completed', ended_at = now(), "
        "completion_reason = 'transferred' WHERE id = $1", uuid.UUID(call_id))
    handoff = await handoffs.begin(
        db.pool, call_id=call_id, workspace_id=workspace_id, reason="asked for a person",
        destination="our Downtown clinic", number="+15550100110",
        conference=f"handoff-{uuid.uuid4().hex}", caller_call_sid="CA1", summary="summary")
    return call_id, handoff


@pytest.mark.parametrize("outcome", ["no_answer", "busy", "failed", "declined"])
async def test_a_call_whose_hand_off_reached_nobody_is_taken_back_once(db, workspace_id,
                                                                      outcome):
    call_id, handoff = await a_handed_off_call(db, workspace_id)
    await handoffs.settle(db.pool, handoff.id, outcome, datetime.now(UTC))

    first = await handoffs.resume_call(db.pool, call_id, None)
    again = await handoffs.resume_call(db.pool, call_id, None)

    call, taken = first
    assert (call["status"], call["ended_at"], call["completion_reason"]) == (
        "in_progress", None, None)
    assert taken.id == handoff.id and taken.resumed_at is not None
    assert again is None


async def test_an_answered_or_ringing_hand_off_is_never_taken_back(db, workspace_id):
    ringing_call, _ = await a_handed_off_call(db, workspace_id)
    answered_call, answered = await a_handed_off_call(db, workspace_id)
    await handoffs.settle(db.pool, answered.id, "answered", datetime.now(UTC))

    assert await handoffs.resume_call(db.pool, ringing_call, None) is None
    assert await handoffs.resume_call(db.pool, answered_call, None) is None


async def test_an_outcome_is_settled_once(db, workspace_id):
    _, handoff = await a_handed_off_call(db, workspace_id)
    now = datetime.now(UTC)

    answered = await handoffs.settle(db.pool, handoff.id, "answered", now)
    late = await handoffs.settle(db.pool, handoff.id, "declined", now)

    assert answered.outcome == "answered" and answered.answered_at == now
    assert late is None
    assert (await handoffs.get(db.pool, handoff.id)).outcome == "answered"
