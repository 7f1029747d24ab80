"""SIGKILL mid-dispatch: the service is killed while Twilio holds its answer to a request
to place an outbound call (the call is placed and rings; the answer never comes back).
The next start picks the task's dial job up again, finds the call Twilio placed and
follows it to its end (its status callback went to the dead process): the callee is
dialled exactly once, and the task is not lost (tried again later)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from db import jobs, outbound
from db import outbound_dial as dials
from db import repositories as repo
from simulator.outbound_callee import CallTiming
from simulator.twilio_rest import FakeTwilioRest
from tests.api.clinics import new_number
from tests.e2e.outbound_tasks import due_task
from tests.e2e.service_process import start_service
from tests.local_http import serve_http

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# Nothing listens here: the webhooks of the call placed for the killed process are lost.
PUBLIC_URL = "http://127.0.0.1:9"
# A job whose worker died is picked again once its heartbeat is this stale
# (runner/job_worker.HEARTBEAT_TIMEOUT), plus a restart.
REPICK_BOUND_S = 90.0


class HoldingTwilio:
    """The Twilio stand-in, except that it never answers the first request to place a
    call: the call is placed (it rings, nobody answers), the process that asked never
    hears back."""

    def __init__(self, twilio: FakeTwilioRest) -> None:
        self.twilio = twilio
        self.held = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        placing = request.method == "POST" and request.path.endswith("/Calls.json")
        response = await self.twilio.handle(request)
        if placing and not self.held.is_set():
            self.held.set()
            await asyncio.Event().wait()  # held until the caller goes away
        return response

    def dials_to(self, number: str) -> int:
        return sum(1 for r in self.twilio.requests if r.method == "POST"
                   and r.path.endswith("/Calls.json") and r.form.get("To") == number)


async def _until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.2)


async def test_a_kill_while_twilio_holds_the_dial_loses_no_task_and_dials_no_one_twice(
        db, tmp_path):
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    clinic_number, callee = new_number(), new_number()
    clinic = await repo.create_service(db.pool, workspace["id"], "Kill Clinic",
                                       phone_number=clinic_number)
    twilio = FakeTwilioRest(timing=CallTiming(no_answer_s=3.0))  # nobody answers
    twilio.add_number(clinic_number)
    holding = HoldingTwilio(twilio)

    async with serve_http(holding.app()) as twilio_url:
        env = {"DATABASE_URL": db.dsn, "LOG_LEVEL": "INFO", "PUBLIC_URL": PUBLIC_URL,
               **twilio.service_env(twilio_url), "OUTBOUND_FOLLOW_UP_S": "2"}
        first = await asyncio.to_thread(
            start_service, {**env, "DATA_DIR": str(tmp_path / "first")},
            tmp_path / "first.log", timeout_s=180)
        try:
            task_id = await due_task(db, workspace["id"], clinic["id"], callee)
            await asyncio.wait_for(holding.held.wait(), 60)
            first.process.kill()  # Twilio placed the call; its answer never arrives
            first.process.wait(10)
        finally:
            if first.process.poll() is None:
                first.process.kill()
        (attempt,) = await outbound.attempts(db.pool, task_id)
        in_flight = (attempt.status, attempt.call_sid)

        second = await asyncio.to_thread(
            start_service, {**env, "DATA_DIR": str(tmp_path / "second")},
            tmp_path / "second.log", timeout_s=180)
        try:
            async def concluded() -> bool:
                found = await dials.get_attempt(db.pool, attempt.id)
                return found.status == "ended"

            await _until(concluded, REPICK_BOUND_S, "the restarted service to end the attempt")
            await asyncio.sleep(5)  # more runs of the job: still no second dial
            ended = await dials.get_attempt(db.pool, attempt.id)
            task = await outbound.get_task(db.pool, None, task_id)
            job = await jobs.job_for(db.pool, outbound.dial_key(task_id))
        finally:
            await asyncio.to_thread(second.stop)

    assert in_flight == ("dialing", None)  # written before the dial, never confirmed
    assert holding.dials_to(callee) == 1  # dialled exactly once, across the kill
    (placed,) = twilio.calls.values()
    assert ended.call_sid == placed.sid and ended.outcome == "no_answer"
    assert len(await outbound.attempts(db.pool, task_id)) == 1
    assert (task.status, task.attempts_made) == ("pending", 1)  # not lost: tried again
    assert task.next_attempt_at > datetime.now(UTC) + timedelta(minutes=30)
    assert job is not None and job.status == "queued"
    print(f"\nkilled mid-dial: the restart adopted Twilio's call and followed it to "
          f"{ended.outcome}; 1 dial in all; next try {task.next_attempt_at:%H:%M} UTC")
