"""What both halves of `bench.outbound` stand on: a database the service processes share,
a clinic, callees that answer fast, outbound tasks that all fall due at one moment, and
the Twilio stand-in in its own process (`bench/twilio_standin.py`)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from pathlib import Path
from typing import Any

import httpx

from db import outbound
from db import repositories as repo
from tests.e2e.outbound_tasks import afternoon_zone
from tests.e2e.service_process import ROOT

# Callees that answer without a media stream, in turn: the dispatcher's whole path
# (dial, status callbacks, outcome, next try) with no conversation to carry.
FAST_CALLEES = ("busy", "no_answer", "voicemail")


# Fictional (555) numbers, each handed out once per run: a number called again would meet
# its daily attempt limit and count as dialled twice.
_NUMBERS = itertools.count(random.randrange(10**6))


def new_number() -> str:
    return f"+1555{next(_NUMBERS) % 10**7:07d}"


@dataclass(frozen=True)
class Clinic:
    workspace_id: str
    service_id: str
    number: str


async def new_clinic(pool) -> Clinic:
    workspace = await repo.create_workspace(pool, f"bench-outbound-{uuid.uuid4().hex[:8]}")
    number = new_number()
    service = await repo.create_service(pool, workspace["id"], "Harbour Clinic",
                                        phone_number=number)
    return Clinic(str(workspace["id"]), str(service["id"]), number)


def callees(count: int) -> dict[str, str]:
    """`count` new numbers, each answered by the next of FAST_CALLEES."""
    return {new_number(): FAST_CALLEES[index % len(FAST_CALLEES)] for index in range(count)}


async def due_tasks(pool, clinic: Clinic, numbers: list[str],
                    due: datetime | list[datetime]) -> list[str]:
    """One callback task per number, falling due at `due` (one moment for all, or one per
    number), written in one transaction (their dial jobs appear together), in a timezone
    where it is the afternoon, any day."""
    zone = afternoon_zone()
    dues = due if isinstance(due, list) else [due] * len(numbers)
    async with pool.acquire() as conn, conn.transaction():
        return [await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=clinic.workspace_id, service_id=clinic.service_id, kind="callback",
            phone=number, reason="asked for a call back", goal="answer their question",
            timezone=zone, not_before=moment, window_start=clock_time(0),
            window_end=clock_time(23, 59, 59), window_days=outbound.EVERY_DAY))
            for number, moment in zip(numbers, dues, strict=True)]


async def first_attempts(pool, task_ids: list[str]) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        """SELECT a.task_id, a.to_number, a.status, a.outcome, a.started_at, a.ended_at
             FROM outbound_attempts a
            WHERE a.task_id = ANY($1::uuid[]) AND a.number = 1""",
        [uuid.UUID(task_id) for task_id in task_ids])
    return [dict(row) for row in rows]


async def wait_for_outcomes(pool, task_ids: list[str], *, dial_timeout_s: float,
                            grace_s: float) -> list[dict[str, Any]]:
    """Every task's first attempt, once each has ended (its outcome known), or once
    `grace_s` has passed since the last was dialled: an outcome still missing then waits
    for the dispatcher's next follow-up with Twilio, minutes away. TimeoutError when some
    task is not dialled within `dial_timeout_s`."""
    deadline = time.monotonic() + dial_timeout_s
    all_dialled: float | None = None
    while True:
        found = await first_attempts(pool, task_ids)
        if len(found) == len(task_ids):
            if all(a["status"] == "ended" for a in found):
                return found
            all_dialled = all_dialled or time.monotonic()
            if time.monotonic() - all_dialled > grace_s:
                return found
        elif time.monotonic() > deadline:
            raise TimeoutError(f"{len(found)} of {len(task_ids)} tasks dialled in "
                               f"{dial_timeout_s:.0f} s")
        await asyncio.sleep(0.2)


async def cancel_open(pool, task_ids: list[str]) -> None:
    """Close the tasks still waiting to be dialled, so the next measurement starts quiet
    (their jobs then find them closed and do nothing)."""
    await pool.execute(
        """UPDATE outbound_tasks SET status = 'cancelled', outcome = NULL, updated_at = now()
            WHERE id = ANY($1::uuid[]) AND status = 'pending'""",
        [uuid.UUID(task_id) for task_id in task_ids])


def due_in(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


@dataclass
class Standin:
    """The Twilio stand-in's process (`bench/twilio_standin.py`)."""

    process: subprocess.Popen
    base_url: str
    account_sid: str
    auth_token: str
    bench_url: str

    @classmethod
    def start(cls, clinic_number: str, log_path: Path) -> Standin:
        log = log_path.open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.twilio_standin", clinic_number], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=log, text=True)
        line = process.stdout.readline() if process.stdout else ""  # "" once it exits
        if not line:
            process.kill()
            raise RuntimeError(f"the Twilio stand-in did not start:\n{log_path.read_text()}")
        ready = json.loads(line)
        return cls(process, ready["base_url"], ready["account_sid"], ready["auth_token"],
                   ready["bench_url"])

    def service_env(self) -> dict[str, str]:
        return {"TWILIO_ACCOUNT_SID": self.account_sid, "TWILIO_AUTH_TOKEN": self.auth_token,
                "TWILIO_API_BASE_URL": self.base_url}

    async def add_callees(self, numbers: dict[str, str]) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            (await http.post(f"{self.bench_url}/callees", json=numbers)).raise_for_status()

    async def calls(self, numbers: set[str]) -> list[dict[str, Any]]:
        """The calls placed to `numbers`."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.get(f"{self.bench_url}/calls")
            response.raise_for_status()
        return [call for call in response.json()["calls"] if call["to"] in numbers]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
