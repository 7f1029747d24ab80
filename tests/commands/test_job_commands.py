"""`python main.py jobs list|retry|cancel`: the person running the deployment sees the
durable jobs, runs a failed one again, and cancels a queued one; an outbound task's dial
is cancelled with its task, not here."""

from __future__ import annotations

import uuid

import pytest

from db import jobs
from db.outbound import DIAL_JOB, dial_key

pytestmark = pytest.mark.timeout(60)


async def spent(db, job_id: int) -> None:
    """The job has used up its retries (the worker holds such a job as failed)."""
    await db.pool.execute("UPDATE pgqueuer SET status = 'failed', attempts = 5 WHERE id = $1",
                          job_id)


async def test_a_failed_job_is_listed_and_run_again(cli, db, capsys):
    appointment = str(uuid.uuid4())
    failed = await jobs.enqueue(db.pool, "practice_push", {"appointment_id": appointment})
    waiting = await jobs.enqueue(db.pool, "post_call", {"call_id": str(uuid.uuid4())})
    await spent(db, failed)

    assert await cli("jobs", "list", "--status", "failed") == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{failed}  practice_push  failed  tries 5  runs ")
    assert appointment in line

    assert await cli("jobs", "retry", str(failed)) == 0
    assert "1 of 1 queued again" in capsys.readouterr().err
    again = await jobs.jobs_by_id(db.pool, [failed, waiting])
    assert [job.status for job in again] == ["queued", "queued"]


async def test_retrying_a_job_that_has_not_failed_changes_nothing_and_says_so(cli, db, capsys):
    waiting = await jobs.enqueue(db.pool, "post_call", {"call_id": str(uuid.uuid4())})

    assert await cli("jobs", "retry", str(waiting), "999999999") == 1

    assert "0 of 2 queued again" in capsys.readouterr().err
    (job,) = await jobs.jobs_by_id(db.pool, [waiting])
    assert (job.status, job.attempts) == ("queued", 0)


async def test_a_queued_job_is_cancelled_but_a_tasks_dial_points_to_the_task(cli, db, capsys):
    post_call = await jobs.enqueue(db.pool, "post_call", {"call_id": str(uuid.uuid4())})
    task_id = str(uuid.uuid4())
    dial = await jobs.enqueue(db.pool, DIAL_JOB, {"task_id": task_id},
                              dedupe_key=dial_key(task_id))

    assert await cli("jobs", "cancel", str(post_call), str(dial)) == 1

    err = capsys.readouterr().err
    assert f"POST /api/tasks/{task_id}/cancel" in err and "1 of 2 cancelled" in err
    assert [job.id for job in await jobs.jobs_by_id(db.pool, [post_call, dial])] == [dial]


async def test_an_empty_queue_says_so(cli, db, capsys):
    assert await cli("jobs", "list", "--kind", "practice_push") == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no jobs of kind practice_push" in captured.err
