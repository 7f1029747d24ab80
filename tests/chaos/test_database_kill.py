"""Chaos: the embedded PostgreSQL's postmaster killed (SIGKILL) mid-call under the real service.

The supervisor notices, restarts the server on the same socket and replays what the
writer spilled meanwhile: /health is ok again within 15 s, with no process restart. While
it is down every request path answers within its bound, and the caller, who said "yes"
just as the database died, hears a next step at once. The call's record holds everything
that was said: nothing was lost.
"""

from __future__ import annotations

import pytest
from loguru import logger

from tests.chaos.database_faults import (
    HEALTHY_BOUND_S,
    REPLY_BOUND_S,
    REQUEST_BOUND_S,
    embedded_service,
    phi_in_log,
)
from tests.chaos.scenarios import kill_database_mid_call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_a_killed_database_is_restarted_without_a_process_restart_and_nothing_is_lost():
    # One retry: what the writer cannot write while the server is down goes to the spool,
    # which the supervisor must replay.
    with embedded_service({"DB_WRITE_RETRIES": "1"}) as service:
        service_pid = service.process.process.pid
        outcome = await kill_database_mid_call(service)
        same_process = service.process.process.poll() is None
        spooled = service.spooled_files()
        log = service.process.log()

    probes, record, health = outcome.probes, outcome.record, outcome.health
    healthy_s = outcome.healthy_after_kill_s
    reply_s, heard = outcome.yes_answered()
    logger.info(f"database killed: healthy again {healthy_s} s later; worst request "
                f"{max(p.seconds for p in probes):.2f} s; the caller's yes answered in "
                f"{reply_s:.2f} s ({heard}); {health['database']['replayed']} spooled records "
                "replayed")

    assert healthy_s is not None and healthy_s < HEALTHY_BOUND_S, log[-4000:]
    assert same_process and service.process.process.pid == service_pid
    assert health["database"]["restarts"] == 1 and health["database"]["state"] == "ok"
    assert max(p.seconds for p in probes) < REQUEST_BOUND_S, probes
    assert reply_s < REPLY_BOUND_S and heard, (reply_s, heard)
    assert health["database"]["replayed"] > 0 and spooled == []
    assert outcome.lost() == [], record
    assert phi_in_log(log) == []
