"""Every kind of durable job this service runs, with its handler and retry policy.

A job's handler gets the process's runtime and the job's payload; it raises to be
retried with backoff (`runner/job_worker.py`). Each handler is idempotent: a job can run
again after a worker died holding it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from db import reminder_texts, reminders, visit_links, waitlist
from db.outbound import DIAL_JOB
from runner import call_analysis, post_call, practice_push, visit_link_jobs
from runner import reminder_texts as reminder_text_jobs
from runner.follow_through_jobs import offer_freed_slot, sweep_interval, sweep_reminders
from runner.job_worker import JobKind
from runner.outbound.dispatcher import outbound_dial
from runner.post_call import AfterCall, run_post_call
from runner.practice_push import Pusher, push_booking

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
        # A booking held on a call reaches the practice system: 8 retries over ~35 min.
        practice_push.RETRIES.kind(practice_push.ENTRYPOINT, bind(_push_booking)),
        # Verify what a call wrote, then sync it: 3 retries, 30 s doubling.
        post_call.RETRIES.kind(post_call.ENTRYPOINT, bind(_post_call)),
        # A call's summary, quality score and memories: 3 retries, 30 s doubling.
        call_analysis.RETRIES.kind(call_analysis.ENTRYPOINT, bind(_analyse_call)),
        # A cancelled appointment's slot, offered to the waitlist.
        JobKind(waitlist.OFFER_JOB, bind(offer_freed_slot)),
        # Reminders for every enabled campaign: one job across processes, every few minutes.
        JobKind(reminders.SWEEP_JOB, bind(sweep_reminders),
                every=sweep_interval(runtime.settings)),
        # One appointment's reminder text, when it is due: 5 retries, 1 min doubling.
        reminder_text_jobs.RETRIES.kind(reminder_texts.TEXT_JOB,
                                        bind(reminder_text_jobs.send_reminder_text)),
        # A booking's video or deposit link the call could not make: made, then texted.
        visit_link_jobs.RETRIES.kind(visit_links.FINISH_JOB,
                                     bind(visit_link_jobs.finish_visit_links)),
    ]
    return {kind.entrypoint: kind for kind in kinds}


async def _push_booking(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    await push_booking(Pusher(runtime.db.pool, runtime.practice, runtime.writer), payload)


async def _analyse_call(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    await call_analysis.run_call_analysis(runtime.analysis_parts(), payload)


async def _post_call(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    await run_post_call(AfterCall(
        runtime.db.pool, runtime.writer, runtime.verifier, runtime.practice,
        runtime.settings.world.phone_country_code), payload)
