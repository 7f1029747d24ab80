"""The chaos scenarios, step by step: each drives the real service through one fault
with a call under way and returns what happened. The chaos tests assert on the outcome;
`bench/recovery.py` times the same runs, so what is measured is what is tested."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx

from config import Settings
from runner.dev_credentials import read_dev_api_key, twilio_auth_token
from simulator.caller_audio import SpeechSegment
from simulator.simulator import CallParties, CallScript, SimulationResult, place_call
from tests.chaos.database_faults import (
    BOOKING_LINES,
    CLINIC_NUMBER,
    CONFIRMATION_LINE,
    PATIENT_NUMBER,
    CueCaller,
    EmbeddedService,
    Probe,
    call_record,
    healthy_within,
    lost_from_record,
    probe_request_paths,
)
from tests.chaos.service_calls import (
    CALLER,
    LiveCall,
    answer_form,
    place,
    signed_post,
    until,
)
from tests.e2e.service_process import ServiceProcess, start_service

LINE_DROP_BOUND_S = 2.0  # a killed process's callers' streams close this soon after the kill
SILENCE_BOUND_S = 3.0  # longest the caller waits, after SIGTERM, for the next audio or the end
EXIT_MARGIN_S = 5.0  # uvicorn's own shutdown and the runtime's close, after the drain
_ORPHANS_CLOSED = re.compile(r"start-up: (\d+) orphaned call\(s\) closed in ([\d.]+) s")


# -- The database stalls or dies under a call ------------------------------------------


@dataclass
class DatabaseFaultOutcome:
    """A booking call that met a database fault as the caller said "yes", and the
    request paths probed meanwhile."""

    caller: CueCaller
    result: SimulationResult
    record: dict[str, Any]  # the call's record once closed
    health: dict[str, Any]  # /health at the end
    probes: list[Probe] = field(default_factory=list)

    def lost(self) -> list[str]:
        """What the caller or agent said that the record lacks (empty: nothing lost)."""
        return lost_from_record(self.record, BOOKING_LINES,
                                [u.text for u in self.result.agent_utterances])

    def yes_answered(self) -> tuple[float, list[str]]:
        """Seconds until the agent answered the caller's "yes", and what it said."""
        return self.caller.replies[CONFIRMATION_LINE]


@dataclass
class FreezeOutcome(DatabaseFaultOutcome):
    frozen: list[int] = field(default_factory=list)  # the PostgreSQL PIDs stopped
    frozen_s: float = 0.0  # how long they stayed stopped
    healthy_after_thaw_s: float | None = None  # None: not ok within the wait
    # The calls answered "technical problem" during the freeze, as the clinic sees them.
    turned_away: list[dict[str, Any]] = field(default_factory=list)


async def freeze_database_mid_call(service: EmbeddedService, freeze_s: float,
                                   probe_every_s: float) -> FreezeOutcome:
    """Freeze the database (SIGSTOP) as the caller says "yes"; probe every request path
    every `probe_every_s` until `freeze_s` have passed; thaw; wait for health."""
    frozen: list[int] = []
    caller = CueCaller(BOOKING_LINES, CONFIRMATION_LINE,
                       lambda: frozen.extend(service.freeze_database()))
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
        call = asyncio.ensure_future(_booking_call(service, caller, "stall"))
        probes: list[Probe] = []
        try:
            await asyncio.wait_for(caller.acted.wait(), 60)
            frozen_at = time.monotonic()
            while time.monotonic() - frozen_at < freeze_s:
                probes += await probe_request_paths(http, service, "CA-never-seen")
                await asyncio.sleep(probe_every_s)
        finally:
            service.thaw_database(frozen)
        frozen_s = time.monotonic() - frozen_at
        thawed_for = await healthy_within(http, 20.0)
        result = await asyncio.wait_for(call, 60)
        record = await call_record(http, service, result.call_id)
        answered = sum(1 for p in probes if p.path == "/voice/answer")
        turned_away = await turned_away_calls(http, service, answered)
        health = (await http.get("/health")).json()
    return FreezeOutcome(caller, result, record, health, probes, frozen, frozen_s, thawed_for,
                         turned_away)


async def turned_away_calls(http: httpx.AsyncClient, service: EmbeddedService, expected: int,
                            wait_s: float = 15.0) -> list[dict[str, Any]]:
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


@dataclass
class DatabaseKillOutcome(DatabaseFaultOutcome):
    healthy_after_kill_s: float | None = None  # None: not ok within the wait


async def kill_database_mid_call(service: EmbeddedService) -> DatabaseKillOutcome:
    """Kill the database's postmaster (SIGKILL) as the caller says "yes"; probe every
    request path once; wait for health to come back on its own."""
    killed: list[float] = []

    def kill() -> None:
        service.kill_database()
        killed.append(time.monotonic())

    caller = CueCaller(BOOKING_LINES, CONFIRMATION_LINE, kill)
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
        call = asyncio.ensure_future(_booking_call(service, caller, "kill"))
        await asyncio.wait_for(caller.acted.wait(), 60)
        probes = await probe_request_paths(http, service, "CA-never-seen")
        healthy = await healthy_within(http, 30.0)
        healthy_s = None if healthy is None else time.monotonic() - killed[0]
        result = await asyncio.wait_for(call, 60)
        record = await call_record(http, service, result.call_id)
        health = (await http.get("/health")).json()
    return DatabaseKillOutcome(caller, result, record, health, probes, healthy_s)


def _booking_call(service: EmbeddedService, caller: CueCaller, name: str):
    """The demo patient's booking call, typed (text mode)."""
    return place_call(
        caller, CallParties.new(PATIENT_NUMBER, CLINIC_NUMBER), base_url=service.url,
        api_key=service.api_key, twilio_token=service.twilio_token, name=name,
        text_mode=True, log=lambda *_: None, record_wait_s=0.1,
        analysis_wait_s=0.0)


# -- The process is stopped (SIGTERM) or killed (SIGKILL) under a call -----------------


@dataclass
class SigtermOutcome:
    """A voice call the service was told to stop under (SIGTERM, mid-greeting)."""

    call: LiveCall
    heard: SimulationResult
    signalled: float  # monotonic time of the signal
    hung_up: float  # monotonic time the caller's stream ended
    health: httpx.Response  # /health just after the signal
    busy_form: dict[str, str]  # a call that arrived during the drain
    busy: httpx.Response  # its answer
    exit_code: int | None
    exited_after_s: float

    def speech_after_signal(self) -> list[SpeechSegment]:
        """The agent audio the caller heard after the signal (caller's clock)."""
        signal_at = self.call.at_s(self.signalled)
        return [s for s in self.heard.agent_speech if s.end_s > signal_at]

    def silences_after_signal(self) -> list[float]:
        """The caller's waits for agent audio after the signal: to the first audio, then
        between heard stretches."""
        after = self.speech_after_signal()
        if not after:
            return []
        gaps = [max(0.0, after[0].start_s - self.call.at_s(self.signalled))]
        return gaps + [b.start_s - a.end_s for a, b in pairwise(after)]

    def new_speech_after_signal_s(self) -> float | None:
        """Seconds from the signal until the first agent speech that began after it
        reached the caller (both on this process's clock; None: none did)."""
        return next((at - self.signalled for at, line in self.call.log
                     if "agent speaking" in line and at >= self.signalled), None)

    def line_dropped_after_last_word_s(self) -> float:
        return self.call.at_s(self.hung_up) - self.speech_after_signal()[-1].end_s


async def sigterm_mid_call(service: ServiceProcess, api_key: str, twilio_token: str,
                           exit_wait_s: float, *, script: CallScript = CALLER,
                           signal_after_s: float = 1.0) -> SigtermOutcome:
    """Place a voice call (`script`), SIGTERM the service `signal_after_s` after the
    agent began its greeting (1 s: mid-greeting), ask /health and place a second call
    during the drain, wait up to `exit_wait_s` for the exit."""
    try:
        call = await place(service.url, api_key, twilio_token, script)
        hung_up: list[float] = []
        call.task.add_done_callback(lambda _task: hung_up.append(time.monotonic()))
        await until(call.heard_speaking, 30, "the agent's greeting")
        await asyncio.sleep(signal_after_s)

        signalled = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        health = await asyncio.to_thread(httpx.get, f"{service.url}/health", timeout=5)
        busy_form = answer_form()
        busy = await asyncio.to_thread(signed_post, service.url, "/voice/answer",
                                       twilio_token, busy_form)
        exit_code = await asyncio.to_thread(service.process.wait, exit_wait_s)
        exited_after = time.monotonic() - signalled
        heard = await asyncio.wait_for(call.task, 30)
    finally:
        if service.process.poll() is None:
            service.process.kill()
    return SigtermOutcome(call, heard, signalled, hung_up[0], health, busy_form, busy,
                          exit_code, exited_after)


@dataclass
class ProcessKillOutcome:
    """A voice call (and a call answered but never streamed) on a service killed with
    SIGKILL, and the next start of the service on the same data directory."""

    call: LiveCall  # the voice call that was live at the kill
    ringing_id: str  # the call answered but never streamed
    line_dropped_s: float  # kill -> the caller's stream closed
    restart_s: float  # the next start -> healthy
    api_key: str
    details: dict[str, dict[str, Any]]  # every call's record after the restart
    stereo: httpx.Response  # the live call's recording, as the API serves it
    restarted: ServiceProcess  # stopped (cleanly) by the time this returns
    orphans_log: re.Match[str] | None  # the restart's "N orphaned call(s) closed in S s"

    @property
    def orphans_closed(self) -> int:
        return int(self.orphans_log[1]) if self.orphans_log else 0

    @property
    def orphans_closed_in_s(self) -> float | None:
        return float(self.orphans_log[2]) if self.orphans_log else None


async def kill_service_mid_call(data_dir: Path) -> ProcessKillOutcome:
    """Serve on `data_dir` (its embedded database), place a voice call and answer one
    more that never streams, SIGKILL the service 3 s into the greeting, start it again."""
    settings = Settings(_env_file=None, data_dir=data_dir)
    first, _ = await serve(data_dir)
    try:
        token, api_key = twilio_auth_token(settings), read_dev_api_key(settings) or ""
        call = await place(first.url, api_key, token)
        await until(call.heard_speaking, 30, "the agent's greeting")
        await asyncio.sleep(3.0)  # seconds of the call reach the recording on disk
        answered = signed_post(first.url, "/voice/answer", token, answer_form())
        ringing_id = answered.text.split('value="')[1].split('"')[0]  # never streams
        dropped: list[float] = []
        call.task.add_done_callback(lambda _task: dropped.append(time.monotonic()))

        killed = time.monotonic()
        first.process.kill()
        first.process.wait(10)
        await asyncio.wait_for(call.task, 30)
    finally:
        if first.process.poll() is None:
            first.process.kill()

    second, restart_s = await serve(data_dir)  # the orphans are closed before it is healthy
    try:
        calls = (await api_get(second, api_key, "/api/calls?limit=50")).json()["calls"]
        details = {c["id"]: (await api_get(second, api_key, f"/api/calls/{c['id']}")).json()
                   for c in calls}
        stereo = await api_get(second, api_key, f"/api/calls/{call.call_id}/recording/stereo")
        closing = _ORPHANS_CLOSED.search(second.log())
    finally:
        second.stop()
    return ProcessKillOutcome(call, ringing_id, dropped[0] - killed, restart_s, api_key,
                              details, stereo, second, closing)


async def serve(data_dir: Path) -> tuple[ServiceProcess, float]:
    """The service on `data_dir`, and the seconds from its start to healthy."""
    started = time.monotonic()
    service = await asyncio.to_thread(
        start_service, {"DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO"},
        data_dir / f"server-{int(started * 1000)}.log", timeout_s=180)
    return service, time.monotonic() - started


async def api_get(service: ServiceProcess, api_key: str, path: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(f"{service.url}{path}",
                              headers={"Authorization": f"Bearer {api_key}"})


def postgres_pid(pg_dir: Path) -> int | None:
    """The embedded server's PID while it runs (its postmaster.pid names it)."""
    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def stop_postgres(pg_dir: Path) -> None:
    pid = postgres_pid(pg_dir)
    if pid is not None:
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
