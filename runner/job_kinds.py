"""Every kind of durable job this service runs, with its handler and retry policy.

A job's handler gets the process's runtime and the job's payload; it raises to be
retried with backoff (`runner/job_worker.py`). Each handler is idempotent: a job can run
again after a worker died holding it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from db.outbound import DIAL_JOB
from runner.job_worker import JobKind
from runner.outbound.dispatcher import outbound_dial

if TYPE_CHECKING:
    from runner.runtime import AppRuntime


def job_kinds(runtime: AppRuntime) -> dict[str, JobKind]:
    """The job kinds, bound to `runtime`."""

    def bind(handler: Any) -> Any:
        async def run(payload: dict[str, Any]) -> None:
            await handler(runtime, payload)

        return run

    kinds: list[JobKind] = [
        # Waiting (for a calling window, a free line, a call's end) re-queues the job
        # without spending its retries; only an error does.
        JobKind(DIAL_JOB, bind(outbound_dial)),
    ]
    return {kind.entrypoint: kind for kind in kinds}
