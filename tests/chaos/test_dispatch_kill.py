"""SIGKILL mid-dispatch: the service is killed while Twilio holds its request to place an
outbound call (the call is placed, the answer never comes back). The next start picks
the task's dial job up again, finds the call Twilio placed and follows it: the callee is
dialled exactly once, and the task is not lost (its status callback still ends the
attempt and queues the next try)."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import urlparse

import httpx
import pytest
from aiohttp import web
from twilio.request_validator import RequestValidator

from db import jobs, outbound
from db import outbound_dial as dials
from db import repositories as repo
from tests.api.clinics import new_number
from tests.e2e.service_process import start_service
from tests.local_http import serve_http

pytest.importorskip("services.twilio.calls", reason="needs the Twilio Calls client")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PUBLIC_URL = "https://agent.example.test"
# A job whose worker died is picked again once its heartbeat is this stale
# (runner/job_worker.HEARTBEAT_TIMEOUT), plus a restart.
REPICK_BOUND_S = 90.0


@dataclass
class HeldCalls:
    """Twilio's Calls resource, holding its answer to every call it places: the call is
    placed (and listed), the process that asked never hears back."""

    account_sid: str = field(default_factory=lambda: "AC" + secrets.token_hex(16))
    auth_token: str = field(default_factory=lambda: secrets.token_hex(16))
    creates: list[dict[str, str]] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    created: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        path = f"/2010-04-01/Accounts/{self.account_sid}/Calls.json"
        app.router.add_post(path, self._create)
        app.router.add_get(path, self._list)
        return app

    async def _create(self, request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        self.creates.append(form)
        now = format_datetime(datetime.now(UTC), usegmt=True)
        self.calls.append({"sid": "CA" + secrets.token_hex(16), "status": "queued",
                           "to": form["To"], "from": form["From"], "start_time": None,
                           "date_created": now, "date_updated": now,
                           "account_sid": self.account_sid, "direction": "outbound-api"})
        self.created.set()
        await asyncio.Event().wait()  # held until the caller goes away
        raise AssertionError("unreachable")

    async def _list(self, request: web.Request) -> web.Response:
        found = [call for call in reversed(self.calls)
                 if call["to"] == request.query.get("To", call["to"])
                 and call["from"] == request.query.get("From", call["from"])]
        return web.json_response({"calls": found, "page": 0, "page_size": 50, "start": 0,
                                  "end": max(len(found) - 1, 0), "next_page_uri": None,
                                  "previous_page_uri": None, "first_page_uri": request.path_qs,
                                  "uri": request.path_qs})


async def _due_task(db, workspace_id: str, service_id: str, callee: str) -> str:
    """A callback to `callee`, due now, in a timezone where it is the afternoon now."""
    hour = datetime.now(UTC).hour
    ahead = next(n for n in range(-12, 15) if 12 <= (hour + n) % 24 <= 16)
    zone = "Etc/GMT" if ahead == 0 else f"Etc/GMT{-ahead:+d}"  # Etc/GMT-3 is UTC+3
    spec = outbound.TaskSpec(
        workspace_id=workspace_id, service_id=service_id, kind="callback", phone=callee,
        reason="asked for a call back", goal="answer their question", timezone=zone,
        not_before=datetime.now(UTC) - timedelta(minutes=1),
        window_start=datetime.min.time(), window_end=datetime.max.time().replace(
            microsecond=0), window_days=outbound.EVERY_DAY)
    async with db.pool.acquire() as conn, conn.transaction():
        return await outbound.create_task(conn, spec)


async def _until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.2)


async def test_a_kill_while_twilio_holds_the_dial_loses_no_task_and_dials_no_one_twice(
        db, tmp_path):
    twilio = HeldCalls()
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    clinic = await repo.create_service(db.pool, workspace["id"], "Kill Clinic",
                                       phone_number=new_number())
    callee = new_number()
    # Jobs other tests left queued are not this service's to dial.
    stale = await db.pool.fetch(
        "SELECT id FROM pgqueuer WHERE entrypoint = $1 AND status = 'queued'", outbound.DIAL_JOB)
    await jobs.cancel(db.pool, [row["id"] for row in stale])

    async with serve_http(twilio.app()) as twilio_url:
        env = {"DATABASE_URL": db.dsn, "LOG_LEVEL": "INFO", "PUBLIC_URL": PUBLIC_URL,
               "TWILIO_ACCOUNT_SID": twilio.account_sid, "TWILIO_AUTH_TOKEN": twilio.auth_token,
               "TWILIO_API_BASE_URL": twilio_url, "OUTBOUND_FOLLOW_UP_S": "2"}
        first = await asyncio.to_thread(
            start_service, {**env, "DATA_DIR": str(tmp_path / "first")},
            tmp_path / "first.log", timeout_s=180)
        try:
            task_id = await _due_task(db, workspace["id"], clinic["id"], callee)
            await asyncio.wait_for(twilio.created.wait(), 60)
            first.process.kill()  # Twilio placed the call; its answer never arrives
            first.process.wait(10)
        finally:
            if first.process.poll() is None:
                first.process.kill()
        (attempt,) = await outbound.attempts(db.pool, task_id)
        assert (attempt.status, attempt.call_sid) == ("dialing", None)  # written before

        second = await asyncio.to_thread(
            start_service, {**env, "DATA_DIR": str(tmp_path / "second")},
            tmp_path / "second.log", timeout_s=180)
        try:
            async def adopted() -> bool:
                found = await dials.get_attempt(db.pool, attempt.id)
                return found.call_sid is not None

            await _until(adopted, REPICK_BOUND_S, "the restarted service to adopt the call")
            await asyncio.sleep(5)  # two more follow-ups: still no second dial
            followed = await dials.get_attempt(db.pool, attempt.id)
            task = await outbound.get_task(db.pool, None, task_id)

            # Twilio's status callback for that call reaches the restarted service.
            callback = twilio.creates[0]["StatusCallback"]
            fields = {"CallSid": followed.call_sid, "CallStatus": "no-answer",
                      "To": callee, "From": clinic["phone_numbers"][0]}
            signature = RequestValidator(twilio.auth_token).compute_signature(callback, fields)
            parts = urlparse(callback)
            posted = await asyncio.to_thread(
                httpx.post, f"{second.url}{parts.path}?{parts.query}", data=fields,
                headers={"X-Twilio-Signature": signature}, timeout=10)
            after = await outbound.get_task(db.pool, None, task_id)

            async def next_try_queued() -> bool:
                job = await jobs.job_for(db.pool, outbound.dial_key(task_id))
                return job is not None and job.status == "queued"

            await _until(next_try_queued, 15, "the next try to be queued")
        finally:
            await asyncio.to_thread(second.stop)

    dials_to_callee = [c for c in twilio.creates if c["To"] == callee]
    assert len(dials_to_callee) == 1  # dialled exactly once, across the kill
    assert followed.call_sid == twilio.calls[0]["sid"]
    assert len(await outbound.attempts(db.pool, task_id)) == 1
    assert task.status == "in_progress"
    assert posted.status_code == 204
    assert (after.status, after.attempts_made) == ("pending", 1)  # not lost: tried again
    print(f"\nkilled mid-dial: the restart adopted Twilio's call, 1 dial in all; "
          f"next try {after.next_attempt_at:%H:%M} UTC")
