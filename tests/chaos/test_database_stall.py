"""Chaos: the embedded PostgreSQL frozen (SIGSTOP) for 30 s under the real service, just as
a caller says "yes" to a booking.

Throughout the freeze every request path answers within its bound: the answer webhook
with the "having trouble" TwiML, a status report with 503, /health degraded with its
reason, an API read 503 with its reason. The caller hears that the booking system is
slow and that the team will check it (no call back is promised), within seconds. Once
thawed the service is healthy again without a restart, and the call's record holds
everything that was said, the unconfirmed booking and its escalation, and every caller
told of a technical problem is on the clinic's record: nothing was lost.
"""

from __future__ import annotations

import pytest
from loguru import logger

from tests.chaos.database_faults import (
    REPLY_BOUND_S,
    REQUEST_BOUND_S,
    embedded_service,
    phi_in_log,
)
from tests.chaos.scenarios import freeze_database_mid_call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FREEZE_S = 30.0
PROBE_EVERY_S = 5.0


async def test_a_30_s_database_freeze_costs_no_caller_a_silence_and_no_record(tmp_path):
    with embedded_service() as service:
        outcome = await freeze_database_mid_call(service, FREEZE_S, PROBE_EVERY_S)
        still_running = service.process.process.poll() is None
        spooled = service.spooled_files()
        log = service.process.log()

    probes, record, health = outcome.probes, outcome.record, outcome.health
    worst = {path: max(p.seconds for p in probes if p.path == path) for path in
             ("/voice/answer", "/voice/status", "/health", "/api/calls")}
    reply_s, heard = outcome.yes_answered()
    thawed_for = outcome.healthy_after_thaw_s
    logger.info(f"freeze {FREEZE_S:g} s: worst answer per path {worst}; the caller's yes "
                f"answered in {reply_s:.2f} s; healthy {thawed_for} s after the thaw")

    rounds = int(FREEZE_S // (PROBE_EVERY_S + REQUEST_BOUND_S))
    assert outcome.frozen and len(probes) >= 4 * rounds
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
    assert outcome.lost() == [], record
    assert phi_in_log(log) == []
    booking = [t for t in record["tool_calls"] if t["name"] == "CreateAppointment"]
    assert booking and booking[-1]["error_class"] == "timeout"
    assert "write_unconfirmed" in {e["type"] for e in record["events"]}
    assert [e["concept"] for e in record["escalations"]] == ["write_unconfirmed"]
    # Every caller told of a technical problem during the freeze is on the clinic's record.
    answered = sum(1 for p in probes if p.path == "/voice/answer")
    assert len(outcome.turned_away) == answered, outcome.turned_away
    for call in outcome.turned_away:
        assert call["ended_at"] and call["service_id"] and call["call_sid"], call
        assert [e["type"] for e in call["events"]] == ["database_unavailable"], call
