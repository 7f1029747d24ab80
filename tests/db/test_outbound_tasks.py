"""Outbound tasks: a task exists exactly with its dial job; cancelling, claiming and
"don't call me again" stop the dialer; a failed task can be tried again."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from db import jobs, outbound
from db.pool import Database


@pytest.fixture
async def patient_id(db: Database, workspace_id: str) -> str:
    return str(await db.pool.fetchval(
        "INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone) "
        "VALUES ($1, 'Ada', 'Byron', '1970-01-02', '+15550001111') RETURNING id",
        uuid.UUID(workspace_id)))


def _spec(workspace_id: str, patient_id: str | None, **changes) -> outbound.TaskSpec:
    values = dict(workspace_id=workspace_id, service_id=None, kind="callback",
                  reason="asked for a call back", goal="answer their billing question",
                  timezone="America/Denver", not_before=datetime.now(UTC) + timedelta(hours=2),
                  patient_id=patient_id)
    return outbound.TaskSpec(**{**values, **changes})


async def _create(db: Database, spec: outbound.TaskSpec) -> str:
    async with db.pool.acquire() as conn, conn.transaction():
        return await outbound.create_task(conn, spec)


async def test_a_new_task_has_its_dial_job_waiting_for_its_time(db, workspace_id, patient_id):
    task_id = await _create(db, _spec(workspace_id, patient_id, priority=8))
    task = await outbound.get_task(db.pool, workspace_id, task_id)
    job = await jobs.job_for(db.pool, outbound.dial_key(task_id))
    assert (task.status, task.kind, task.priority) == ("pending", "callback", 8)
    assert job.status == "queued" and job.payload == {"task_id": task_id}
    assert job.execute_after > datetime.now(UTC) + timedelta(minutes=110)


async def test_another_workspace_cannot_see_or_cancel_the_task(db, workspace_id, patient_id):
    other = str(await db.pool.fetchval(
        "INSERT INTO workspaces (name) VALUES ('other clinic') RETURNING id"))
    task_id = await _create(db, _spec(workspace_id, patient_id))
    assert await outbound.get_task(db.pool, other, task_id) is None
    assert not await outbound.cancel_task(db.pool, other, task_id)
    assert (await outbound.get_task(db.pool, workspace_id, task_id)).status == "pending"


async def test_cancelling_or_claiming_a_task_takes_its_dial_job_away(db, workspace_id, patient_id):
    cancelled = await _create(db, _spec(workspace_id, patient_id))
    claimed = await _create(db, _spec(workspace_id, patient_id))
    assert await outbound.cancel_task(db.pool, workspace_id, cancelled)
    assert await outbound.claim_task(db.pool, workspace_id, claimed, actor="key vk_ab12")
    for task_id in (cancelled, claimed):
        assert await jobs.job_for(db.pool, outbound.dial_key(task_id)) is None
    task = await outbound.get_task(db.pool, workspace_id, claimed)
    assert (task.status, task.outcome, task.claimed_by) == ("claimed", "claimed", "key vk_ab12")
    assert not await outbound.claim_task(db.pool, workspace_id, cancelled, actor="someone")


async def test_a_failed_task_retried_is_pending_again_with_a_job_due_now(db, workspace_id, patient_id):
    task_id = await _create(db, _spec(workspace_id, patient_id, max_attempts=1))
    await jobs.cancel_key(db.pool, outbound.dial_key(task_id))
    assert await outbound.finish_task(db.pool, task_id, outcome="no_answer", status="failed")
    assert await outbound.retry_task(db.pool, workspace_id, task_id)
    task = await outbound.get_task(db.pool, workspace_id, task_id)
    job = await jobs.job_for(db.pool, outbound.dial_key(task_id))
    assert (task.status, task.outcome) == ("pending", None)
    assert job.execute_after <= datetime.now(UTC) + timedelta(seconds=5)
    assert not await outbound.retry_task(db.pool, workspace_id, task_id)  # already open


async def test_dont_call_me_again_cancels_every_open_task_of_theirs(db, workspace_id, patient_id):
    mine = [await _create(db, _spec(workspace_id, patient_id)) for _ in range(2)]
    by_number = await _create(db, _spec(workspace_id, None, phone="+15550002222"))
    assert await outbound.set_do_not_call(db.pool, workspace_id, patient_id=patient_id,
                                          phone=None, call_id=None) == 2
    assert await outbound.set_do_not_call(db.pool, workspace_id, patient_id=None,
                                          phone="+15550002222", call_id=None) == 1
    for task_id in [*mine, by_number]:
        task = await outbound.get_task(db.pool, workspace_id, task_id)
        assert (task.status, task.outcome) == ("cancelled", "opted_out")
    assert not await outbound.may_call(db.pool, workspace_id, patient_id=patient_id, phone=None)
    assert not await outbound.may_call(db.pool, workspace_id, patient_id=None,
                                       phone="+15550002222")
    assert await outbound.may_call(db.pool, workspace_id, patient_id=None, phone="+15550003333")
