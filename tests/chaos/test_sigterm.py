"""SIGTERM mid-call: the caller is not cut off. The sentence under way is finished, the
caller hears that the call must end, the call is recorded `server_shutdown`; a call that
arrives meanwhile hears the lines are busy and is on record; /health sends the load
balancer elsewhere; the process exits within its drain bound."""

from __future__ import annotations

import asyncio
import signal
import time
from itertools import pairwise

import httpx
import pytest

from config import Settings
from db import repositories as repo
from db.seed import seed_demo
from lib.prompts import render_prompt
from runner.dev_credentials import twilio_auth_token
from tests.chaos.service_calls import answer_form, place, signed_post, until
from tests.e2e.service_process import start_service

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

# Room for the rest of the local voice's greeting, then the line, on a loaded 2-core
# machine (12-18 s measured); the process exits as soon as the call has ended, not at it.
DRAIN_S = 30.0
EXIT_MARGIN_S = 5.0  # uvicorn's own shutdown and the runtime's close, after the drain
SILENCE_BOUND_S = 3.0  # longest the caller waits, after the signal, for the next audio or the end


async def test_sigterm_mid_call_tells_the_caller_ends_the_call_and_exits_in_bound(db, tmp_path):
    seeded = await seed_demo(db.pool)
    api_key = await repo.create_api_key(db.pool, seeded.workspace_id, "chaos-sigterm")
    dsn = db.dsn
    service = await asyncio.to_thread(start_service, {
        "DATABASE_URL": dsn, "DATA_DIR": str(tmp_path), "LOG_LEVEL": "INFO",
        "SHUTDOWN_DRAIN_S": str(DRAIN_S),
    }, tmp_path / "server.log", timeout_s=120)
    token = twilio_auth_token(Settings(_env_file=None, data_dir=tmp_path, database_url=dsn))
    try:
        call = await place(service.url, api_key, token)
        hung_up: list[float] = []
        call.task.add_done_callback(lambda _task: hung_up.append(time.monotonic()))
        await until(call.heard_speaking, 30, "the agent's greeting")
        await asyncio.sleep(1.0)  # the agent is mid-greeting

        signalled = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        health = await asyncio.to_thread(httpx.get, f"{service.url}/health", timeout=5)
        busy_form = answer_form()
        busy = await asyncio.to_thread(signed_post, service.url, "/voice/answer", token,
                                       busy_form)
        exit_code = await asyncio.to_thread(service.process.wait, DRAIN_S + EXIT_MARGIN_S + 10)
        exited_after = time.monotonic() - signalled
        heard = await asyncio.wait_for(call.task, 30)
    finally:
        if service.process.poll() is None:
            service.process.kill()

    log = service.log()
    # The load balancer is told to send calls elsewhere; a call that came anyway was
    # told the lines are busy (never silence) and is on record.
    assert health.status_code == 503 and health.json()["status"] == "draining"
    assert busy.status_code == 200 and "<Say>" in busy.text and "<Stream" not in busy.text
    turned_away = await repo.find_call_by_sid(db.pool, busy_form["CallSid"])
    assert turned_away is not None and turned_away["ended_at"] is not None
    [why] = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                turned_away["id"])
    assert (why["type"], why["data"]["draining"]) == ("at_capacity", True)
    # The process exited within its bound (uvicorn re-raises the signal once it is done).
    assert exit_code in (0, -signal.SIGTERM), log[-3000:]
    assert exited_after < DRAIN_S + EXIT_MARGIN_S, log[-3000:]
    # The caller heard the agent after the signal: the greeting finished, then the line.
    signal_at = call.at_s(signalled)
    after = [s for s in heard.agent_speech if s.end_s > signal_at]
    assert after, f"no agent audio after SIGTERM: {heard.agent_speech}"
    gaps = [max(0.0, after[0].start_s - signal_at)]
    gaps += [b.start_s - a.end_s for a, b in pairwise(after)]
    assert max(gaps) < SILENCE_BOUND_S, gaps
    assert not any(s.cut_short for s in after)
    line_dropped = call.at_s(hung_up[0]) - after[-1].end_s  # the last word, then the end
    assert line_dropped < SILENCE_BOUND_S
    # The record: nothing lost, closed server_shutdown, the line it said.
    record = await repo.get_call_detail(db.pool, call.call_id, seeded.workspace_id)
    assert record["status"] == "completed"
    assert record["completion_reason"] == "server_shutdown", log[-3000:]
    events = [e["type"] for e in record["events"]]
    assert {"call_started", "server_draining", "call_ended"} <= set(events)
    agent = " ".join(t["text"] for t in record["turns"] if t["speaker_role"] == "agent")
    assert agent.endswith(render_prompt("telephony/shutdown.txt"))
    assert not any(t["interrupted"] for t in record["turns"] if t["speaker_role"] == "agent")
    assert record["recording_path"] is not None
    assert "drained: 1 call(s) ended with their line, 0 cut off" in log
    print(f"\nSIGTERM: exited after {exited_after:.2f} s; the caller heard {len(after)} "
          f"agent segment(s) after it (longest gap {max(gaps):.2f} s), the line ended "
          f"{line_dropped:.2f} s after the last word")
