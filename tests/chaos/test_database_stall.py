"""Chaos: the embedded PostgreSQL frozen (SIGSTOP) for 30 s under the real service, just as
a caller says "yes" to a booking.

Throughout the freeze every request path answers within its bound: the answer webhook
with the "having trouble" TwiML, a status report with 503, /health degraded with its
reason, an API read 503 with its reason. The caller hears that the booking system is
slow and that the clinic will call back, within seconds. Once thawed the service is
healthy again without a restart, and the call's record holds everything that was said,
the unconfirmed booking and its escalation: nothing was lost.
"""

from __future__ import annotations

import asyncio
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

pytestmark = pytest.mark.timeout(300)

FREEZE_S = 30.0
PROBE_EVERY_S = 5.0
# The booking tool gives up at 3 s; the agent's spoken answer follows at once.
REPLY_BOUND_S = 6.0


async def test_a_30_s_database_freeze_costs_no_caller_a_silence_and_no_record(tmp_path):
    with embedded_service() as service:
        frozen: list[int] = []

        def freeze() -> None:
            for pid in service.postgres_pids():
                signal_pid(pid, signal.SIGSTOP)
                frozen.append(pid)

        caller = CueCaller(BOOKING_LINES, CONFIRMATION_LINE, freeze)
        async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
            call = asyncio.ensure_future(place_call(
                caller, CallParties.new(PATIENT_NUMBER, CLINIC_NUMBER), base_url=service.url,
                api_key=service.api_key, twilio_token=service.twilio_token, name="stall",
                text_mode=True, log=lambda *_: None, record_wait_s=0.1))
            probes = []
            try:
                await asyncio.wait_for(caller.acted.wait(), 60)
                frozen_at = time.monotonic()
                while time.monotonic() - frozen_at < FREEZE_S:
                    probes += await probe_request_paths(http, service, "CA-never-seen")
                    await asyncio.sleep(PROBE_EVERY_S)
            finally:
                for pid in frozen:
                    signal_pid(pid, signal.SIGCONT)
            thawed_for = await healthy_within(http, 20.0)
            result = await asyncio.wait_for(call, 60)
            record = await call_record(http, service, result.call_id)
            answered = sum(1 for p in probes if p.path == "/voice/answer")
            turned_away = await turned_away_calls(http, service, answered)
            health = (await http.get("/health")).json()
        still_running = service.process.process.poll() is None
        spooled = service.spooled_files()
        log = service.process.log()

    worst = {path: max(p.seconds for p in probes if p.path == path) for path in
             ("/voice/answer", "/voice/status", "/health", "/api/calls")}
    reply_s, heard = caller.replies[CONFIRMATION_LINE]
    logger.info(f"freeze {FREEZE_S:g} s: worst answer per path {worst}; the caller's yes "
                f"answered in {reply_s:.2f} s; healthy {thawed_for} s after the thaw")
    agent_said = [u.text for u in result.agent_utterances]

    assert frozen and len(probes) >= 4 * int(FREEZE_S // (PROBE_EVERY_S + REQUEST_BOUND_S))
    assert max(worst.values()) < REQUEST_BOUND_S, (worst, log[-4000:])
    for probe in probes:
        if probe.path == "/voice/answer":
            assert probe.status == 200 and "technical problem" in probe.body, probe
        elif probe.path == "/voice/status":
            assert probe.status in (204, 503), probe
        elif probe.path == "/health":
            assert probe.status == 503 and '"status":"degraded"' in probe.body, probe
        else:
            assert probe.status == 503 and "database unavailable" in probe.body, probe
    # The caller said yes while the database was frozen, and heard the next step quickly.
    assert reply_s < REPLY_BOUND_S, (reply_s, heard)
    assert any("booking system is slow" in line for line in heard), heard
    # Healthy again without a restart; the spool replayed; nothing lost.
    assert thawed_for is not None and still_running, log[-4000:]
    assert health["database"]["outages"] >= 1 and health["database"]["restarts"] == 0
    assert spooled == []
    assert lost_from_record(record, BOOKING_LINES, agent_said) == [], record
    assert phi_in_log(log) == []
    booking = [t for t in record["tool_calls"] if t["name"] == "CreateAppointment"]
    assert booking and booking[-1]["error_class"] == "timeout"
    assert "write_unconfirmed" in {e["type"] for e in record["events"]}
    assert [e["concept"] for e in record["escalations"]] == ["write_unconfirmed"]
    # Every caller told of a technical problem during the freeze is on the clinic's record.
    assert len(turned_away) == answered, turned_away
    for call in turned_away:
        assert call["ended_at"] and call["service_id"] and call["call_sid"], call
        assert [e["type"] for e in call["events"]] == ["database_unavailable"], call


async def turned_away_calls(http: httpx.AsyncClient, service, expected: int,
                            wait_s: float = 15.0) -> list[dict]:
    """The clinic's calls closed `database_unavailable`, in detail, once `expected` of them
    are on record (or `wait_s` has passed: the spool may still be replaying)."""
    auth = {"Authorization": f"Bearer {service.api_key}"}
    deadline = time.monotonic() + wait_s
    while True:
        listed = (await http.get("/api/calls", headers=auth, params={
            "completion_reason": "database_unavailable", "limit": 100})).json()["calls"]
        if len(listed) >= expected or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    return [(await http.get(f"/api/calls/{call['id']}", headers=auth)).json()
            for call in listed]


def signal_pid(pid: int, signum: signal.Signals) -> None:
    import os

    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
