"""Chaos: the embedded PostgreSQL's postmaster killed (SIGKILL) mid-call under the real service.

The supervisor notices, restarts the server on the same socket and replays what the
writer spilled meanwhile: /health is ok again within 15 s, with no process restart. While
it is down every request path answers within its bound, and the caller, who said "yes"
just as the database died, hears a next step at once. The call's record holds everything
that was said: nothing was lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest
from loguru import logger

from simulator.simulator import CallParties, place_call
from tests.chaos.database_faults import (
    BOOKING_LINES,
    CLINIC_NUMBER,
    CONFIRMATION_LINE,
    PATIENT_NUMBER,
    REQUEST_BOUND_S,
    CueCaller,
    call_record,
    embedded_service,
    healthy_within,
    lost_from_record,
    phi_in_log,
    probe_request_paths,
)

pytestmark = pytest.mark.timeout(240)

HEALTHY_BOUND_S = 15.0
REPLY_BOUND_S = 6.0


async def test_a_killed_database_is_restarted_without_a_process_restart_and_nothing_is_lost():
    # One retry: what the writer cannot write while the server is down goes to the spool,
    # which the supervisor must replay.
    with embedded_service({"DB_WRITE_RETRIES": "1"}) as service:
        killed: dict[str, float] = {}

        def kill() -> None:
            os.kill(service.postmaster_pid(), signal.SIGKILL)
            killed["at"] = time.monotonic()

        caller = CueCaller(BOOKING_LINES, CONFIRMATION_LINE, kill)
        service_pid = service.process.process.pid
        async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
            call = asyncio.ensure_future(place_call(
                caller, CallParties.new(PATIENT_NUMBER, CLINIC_NUMBER), base_url=service.url,
                api_key=service.api_key, twilio_token=service.twilio_token, name="kill",
                text_mode=True, log=lambda *_: None, record_wait_s=0.1))
            await asyncio.wait_for(caller.acted.wait(), 60)
            probes = await probe_request_paths(http, service, "CA-never-seen")
            healthy = await healthy_within(http, 30.0)
            healthy_s = None if healthy is None else time.monotonic() - killed["at"]
            result = await asyncio.wait_for(call, 60)
            record = await call_record(http, service, result.call_id)
            health = (await http.get("/health")).json()
        same_process = service.process.process.poll() is None
        spooled = service.spooled_files()
        log = service.process.log()

    reply_s, heard = caller.replies[CONFIRMATION_LINE]
    logger.info(f"database killed: healthy again {healthy_s} s later; worst request "
                f"{max(p.seconds for p in probes):.2f} s; the caller's yes answered in "
                f"{reply_s:.2f} s ({heard}); {health['database']['replayed']} spooled records "
                "replayed")
    agent_said = [u.text for u in result.agent_utterances]

    assert healthy_s is not None and healthy_s < HEALTHY_BOUND_S, log[-4000:]
    assert same_process and service.process.process.pid == service_pid
    assert health["database"]["restarts"] == 1 and health["database"]["state"] == "ok"
    assert max(p.seconds for p in probes) < REQUEST_BOUND_S, probes
    assert reply_s < REPLY_BOUND_S and heard, (reply_s, heard)
    assert health["database"]["replayed"] > 0 and spooled == []
    assert lost_from_record(record, BOOKING_LINES, agent_said) == [], record
    assert phi_in_log(log) == []
