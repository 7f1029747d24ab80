"""What the database-fault chaos tests share: the real service on its own embedded
PostgreSQL, that server's processes (to freeze or kill), signed webhooks, a probe of every
request path, a caller who acts on cue mid-call, and the check that no record was lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from twilio.request_validator import RequestValidator

from config import Settings
from runner.dev_credentials import read_dev_api_key, twilio_auth_token
from simulator.caller_audio import CallerLine, LineCue
from tests.e2e.service_process import ServiceProcess, start_service

# What a webhook, /health or an API read may take whatever the database does (Twilio
# gives up on a webhook at 15 s; ours answer within 2 s).
REQUEST_BOUND_S = 2.5
# The booking tool gives up at 3 s; the agent's spoken answer follows at once.
REPLY_BOUND_S = 6.0
# A killed embedded database is restarted by the supervisor and healthy within this.
HEALTHY_BOUND_S = 15.0
# A demo patient calling from their own number books a physio session; the fourth line
# is the "yes" that makes the booking.
BOOKING_LINES = (
    "Hi, I need to book a physio session.",
    "Sometime next week in the afternoon.",
    "The second one please.",
    "Yes, that's right.",
    "That's everything, bye.",
)
CONFIRMATION_LINE = 4
PATIENT_NUMBER = "+15550100201"
CLINIC_NUMBER = "+15550100100"


@dataclass
class EmbeddedService:
    """`python main.py serve` on a data directory of its own, with the embedded database."""

    process: ServiceProcess
    settings: Settings
    api_key: str
    twilio_token: str

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def pg_dir(self) -> Path:
        return self.settings.storage.embedded_db_dir

    def postmaster_pid(self) -> int:
        return int((self.pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def postgres_pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, ...)."""
        postmaster = psutil.Process(self.postmaster_pid())
        return [postmaster.pid, *(child.pid for child in postmaster.children(recursive=True))]

    def freeze_database(self) -> list[int]:
        """SIGSTOP every PostgreSQL process: the server stalls, its sockets stay open.
        Returns the PIDs to thaw."""
        pids = self.postgres_pids()
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def thaw_database(pids: list[int]) -> None:
        for pid in pids:
            _signal(pid, signal.SIGCONT)

    def kill_database(self) -> None:
        """SIGKILL the postmaster, as a crash would (its backends then exit on their own)."""
        os.kill(self.postmaster_pid(), signal.SIGKILL)

    def spooled_files(self) -> list[Path]:
        """Spool files still waiting to be replayed."""
        spool = self.settings.storage.data_dir / "spool"
        return sorted([*spool.glob("spool-*.jsonl"), *spool.glob("replaying-*.jsonl")])


@contextlib.contextmanager
def embedded_service(env: dict[str, str] | None = None) -> Iterator[EmbeddedService]:
    """The real service on a fresh embedded database (in /tmp: its socket path must be
    short, and as root every ancestor must be traversable by PostgreSQL's own user)."""
    data_dir = Path(tempfile.mkdtemp(prefix="vachaos-", dir="/tmp"))
    process = start_service({"DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO", **(env or {})},
                            data_dir / "server.log", timeout_s=120)
    settings = Settings(_env_file=None, data_dir=data_dir, database_url=None)
    try:
        yield EmbeddedService(process, settings, read_dev_api_key(settings) or "",
                              twilio_auth_token(settings))
    finally:
        process.stop()
        _stop_leftover_server(settings.storage.embedded_db_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _stop_leftover_server(pg_dir: Path) -> None:
    """A failed test must not leave PostgreSQL running (or frozen)."""
    pid_file = pg_dir / "postmaster.pid"
    if not pid_file.exists():
        return
    with contextlib.suppress(Exception):
        postmaster = psutil.Process(int(pid_file.read_text().split("\n", 1)[0]))
        for process in [postmaster, *postmaster.children(recursive=True)]:
            process.resume()
        postmaster.terminate()
        postmaster.wait(10)


def signed(service: EmbeddedService, path: str, form: dict[str, str]) -> dict[str, Any]:
    """httpx keyword arguments for a webhook signed as Twilio signs it."""
    signature = RequestValidator(service.twilio_token).compute_signature(
        f"{service.url}{path}", form)
    return {"data": form, "headers": {"X-Twilio-Signature": signature}}


def ringing(call_sid: str | None = None) -> dict[str, str]:
    return {"CallSid": call_sid or "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
            "From": "+15550100999", "To": CLINIC_NUMBER, "CallStatus": "ringing"}


@dataclass
class Probe:
    """One request on one path: its status, body and seconds."""

    path: str
    status: int
    seconds: float
    body: str


async def probe_request_paths(http: httpx.AsyncClient, service: EmbeddedService,
                              status_for: str) -> list[Probe]:
    """A new call's answer webhook, a status report for call `status_for` (its CallSid),
    /health and an API read, all at once."""
    auth = {"Authorization": f"Bearer {service.api_key}"}
    requests = {
        "/voice/answer": http.post("/voice/answer", **signed(service, "/voice/answer",
                                                             ringing())),
        "/voice/status": http.post("/voice/status", **signed(
            service, "/voice/status", {**ringing(status_for), "CallStatus": "completed"})),
        "/health": http.get("/health"),
        "/api/calls": http.get("/api/calls", params={"limit": 5}, headers=auth),
    }
    return list(await asyncio.gather(*(_timed(path, request)
                                       for path, request in requests.items())))


async def _timed(path: str, request) -> Probe:
    started = time.monotonic()
    try:
        response = await request
    except httpx.TimeoutException:
        return Probe(path, 0, time.monotonic() - started, "client timeout")
    return Probe(path, response.status_code, time.monotonic() - started, response.text)


async def healthy_within(http: httpx.AsyncClient, seconds: float) -> float | None:
    """Seconds until /health says ok (200, database state ok); None if it never did."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        with contextlib.suppress(httpx.HTTPError):
            response = await http.get("/health")
            if response.status_code == 200 and response.json()["database"]["state"] == "ok":
                return time.monotonic() - started
        await asyncio.sleep(0.2)
    return None


@dataclass
class CueCaller:
    """Says `texts` in order; just before line `act_before` it runs `act` (freeze or kill
    the database). Notes how long the agent took to answer each line and what it said."""

    texts: tuple[str, ...]
    act_before: int
    act: Callable[[], None]
    hangup_after_s: float | None = None
    acted: asyncio.Event = field(default_factory=asyncio.Event)
    replies: dict[int, tuple[float, list[str]]] = field(default_factory=dict)
    _sent_at: dict[int, float] = field(default_factory=dict)
    _next: int = 0

    def next_cue(self) -> LineCue | None:
        return LineCue(0.2, False, 20.0) if self._next < len(self.texts) else None

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None:
        now = time.monotonic()
        if number - 1 in self._sent_at:
            self.replies[number - 1] = (now - self._sent_at[number - 1], list(heard))
        if number == self.act_before:
            self.act()
            self.acted.set()
        text = self.texts[self._next]
        self._next += 1
        self._sent_at[number] = time.monotonic()
        return CallerLine(number, text, [], 0.2, False, 20.0)


async def call_record(http: httpx.AsyncClient, service: EmbeddedService, call_id: str,
                      wait_s: float = 30.0) -> dict[str, Any]:
    """The call's record once it is closed (a completion reason) and no longer changing."""
    auth = {"Authorization": f"Bearer {service.api_key}"}
    deadline = time.monotonic() + wait_s
    record: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = await http.get(f"/api/calls/{call_id}", headers=auth)
        if response.status_code == 200:
            latest = response.json()
            if latest.get("completion_reason") and latest == record:
                return record
            record = latest
        await asyncio.sleep(0.5)
    return record


def lost_from_record(record: dict[str, Any], caller_lines: tuple[str, ...],
                     agent_said: list[str]) -> list[str]:
    """What the caller or the agent said that the record does not hold, and what a closed
    record lacks (empty: nothing lost)."""
    lost = [f"call not closed ({field_name} unset)" for field_name in ("ended_at",
            "completion_reason") if not record.get(field_name)]
    turns = record.get("turns") or []
    said_by = {role: " ".join(_normal(t["text"]) for t in turns if t["speaker_role"] == role)
               for role in ("caller", "agent")}
    lost += [f"caller line missing: {line!r}" for line in caller_lines
             if _normal(line) not in said_by["caller"]]
    lost += [f"agent line missing: {text!r}" for text in agent_said
             if _normal(text) not in said_by["agent"]]
    return lost


def phi_in_log(log: str) -> list[str]:
    """The demo caller's number or name, wherever the service's log shows them."""
    return [item for item in ("5550100201", "Margaret", "Chen") if item in log]


def _normal(text: str) -> str:
    return " ".join(text.lower().split())
