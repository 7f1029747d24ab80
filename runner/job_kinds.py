"""Every kind of durable job this service runs, with its handler and retry policy.

A job's handler gets the process's runtime and the job's payload; it raises to be
retried with backoff (`runner/job_worker.py`). Each handler is idempotent: a job can run
again after a worker died holding it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from db import reminders, waitlist
from runner.follow_through_jobs import offer_freed_slot, sweep_interval, sweep_reminders
from runner.job_worker import JobKind

if TYPE_CHECKING:
    from runner.runtime import AppRuntime


def job_kinds(runtime: AppRuntime) -> dict[str, JobKind]:
    """The job kinds, bound to `runtime`."""

    def bind(handler: Any) -> Any:
        async def run(payload: dict[str, Any]) -> None:
            await handler(runtime, payload)

        return run

    kinds: list[JobKind] = [
        JobKind(waitlist.OFFER_JOB, bind(offer_freed_slot)),
        JobKind(reminders.SWEEP_JOB, bind(sweep_reminders),
                every=sweep_interval(runtime.settings)),
    ]
    return {kind.entrypoint: kind for kind in kinds}
