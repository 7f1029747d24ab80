"""`jobs list`, `jobs retry ID...` and `jobs cancel ID...`: the durable job queue as the
person running the deployment sees it (whoever runs these holds the database, so they
see every workspace's jobs). A job names only ids (a task, an appointment, a call),
never what a patient said.

A job that spent its retries is held as `failed` until someone retries it. An outbound
task's dial job is not cancelled here: cancelling the task (`POST /api/tasks/{id}/cancel`
or the dashboard) cancels its job with it, where cancelling only the job would leave the
task waiting for a dial that never comes.
"""

from __future__ import annotations

import argparse
import json
import sys

from commands.database import run_with_database
from config import Settings
from db import jobs
from db.outbound import DIAL_JOB
from db.pool import Database

STATUSES = ("queued", "picked", "failed")


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("jobs", help="list, retry and cancel durable jobs")
    sub = group.add_subparsers(dest="jobs_command", required=True)
    listing = sub.add_parser("list", help="queued, running and failed jobs, newest first")
    listing.add_argument("--kind", help="only this kind (e.g. practice_push, outbound_dial)")
    listing.add_argument("--status", choices=STATUSES, help="only jobs in this state")
    listing.add_argument("--limit", type=int, default=50)
    retry = sub.add_parser("retry", help="run failed jobs again, now")
    retry.add_argument("ids", nargs="+", type=int)
    cancel = sub.add_parser("cancel", help="cancel queued jobs (not an outbound task's dial)")
    cancel.add_argument("ids", nargs="+", type=int)


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.jobs_command == "retry":
        return run_with_database(settings, lambda db: retry(db, args.ids))
    if args.jobs_command == "cancel":
        return run_with_database(settings, lambda db: cancel(db, args.ids))
    return run_with_database(settings, lambda db: list_open(db, args.kind, args.status,
                                                            args.limit))


def describe(job: jobs.JobRow) -> str:
    """One line per job: id, kind, state, failures so far, when it runs, what it is for."""
    return (f"{job.id}  {job.entrypoint}  {job.status}  tries {job.attempts}  "
            f"runs {job.execute_after:%Y-%m-%d %H:%M:%S %Z}  "
            f"{json.dumps(job.payload, sort_keys=True)}")


async def list_open(db: Database, kind: str | None, status: str | None, limit: int) -> int:
    found = await jobs.list_jobs(db.pool, entrypoint=kind, status=status,
                                 limit=max(1, limit))
    if not found:
        print("no jobs" + (f" of kind {kind}" if kind else "")
              + (f" {status}" if status else ""), file=sys.stderr)
    for job in found:
        print(describe(job))
    return 0


async def retry(db: Database, ids: list[int]) -> int:
    retried = await jobs.retry_failed(db.pool, ids)
    print(f"{retried} of {len(ids)} queued again", file=sys.stderr)
    return 0 if retried == len(ids) else 1


async def cancel(db: Database, ids: list[int]) -> int:
    found = {job.id: job for job in await jobs.jobs_by_id(db.pool, ids)}
    dials = [job_id for job_id, job in found.items() if job.entrypoint == DIAL_JOB]
    for job_id in dials:
        print(f"{job_id} dials an outbound task: cancel the task instead "
              f"(POST /api/tasks/{found[job_id].payload.get('task_id')}/cancel)",
              file=sys.stderr)
    queued = [job_id for job_id, job in found.items()
              if job.entrypoint != DIAL_JOB and job.status == "queued"]
    await jobs.cancel(db.pool, queued)
    print(f"{len(queued)} of {len(ids)} cancelled", file=sys.stderr)
    return 0 if len(queued) == len(ids) else 1
