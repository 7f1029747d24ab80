"""What the follow-through end-to-end tests share: a database of their own (so no other
service's job worker takes their jobs), a clinic made from a clinic file in a timezone
where it is the afternoon now, and the real service pointed at the Twilio stand-in."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from datetime import time as clock
from pathlib import Path
from typing import TypeVar

import asyncpg
import httpx
import yaml

from config import Settings
from db.clinic.file import parse_clinic_text
from db.clinic.store import import_clinic
from db.migrations import apply_migrations
from db.pool import Database
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.api.clinics import new_number
from tests.db.conftest import dsn_for_database
from tests.e2e.service_process import ServiceProcess, free_port, start_service

T = TypeVar("T")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
POLL_S = 0.5
UNAVAILABLE_RETRY_S = 20.0


@asynccontextmanager
async def database_of_its_own(pg_dsn: str, data_dir: Path) -> AsyncIterator[Database]:
    """A migrated database on the session's server, dropped afterwards."""
    name = f"e2e_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        dsn = dsn_for_database(pg_dsn, name)
        settings = Settings(_env_file=None, data_dir=data_dir, database_url=dsn)
        migrating = await Database.connect(settings, max_size=1)
        try:
            await apply_migrations(migrating.pool)
        finally:
            await migrating.close()
        database = await Database.connect(settings)  # its connections know pgvector's type
        try:
            yield database
        finally:
            await database.close()
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@dataclass(frozen=True)
class Clinic:
    service_id: str
    number: str  # the number callers dial and the clinic calls from
    zone: str


def clinic_file(name: str, number: str, zone: str, opens: clock, closes: clock) -> str:
    """A clinic file: one location in `zone`, open `opens`-`closes` every day; Dr. Ana
    Sousa sees consultations and physiotherapy all those hours."""
    hours = [f"{opens:%H:%M}", f"{closes:%H:%M}"]
    return yaml.safe_dump({
        "version": 1,
        "clinic": {"name": name, "phone_numbers": [number]},
        "locations": [{"name": "Harbour", "timezone": zone, "address": "1 Quay Street",
                       "phone_number": new_number(),
                       "opening_hours": {day: list(hours) for day in DAYS}}],
        "practitioners": [{"name": "Dr. Ana Sousa", "title": "Family physician"}],
        "appointment_types": [
            {"name": "Consultation", "duration_min": 30, "price_cents": 12000,
             "description": "A visit with a doctor about a new or ongoing problem."},
            {"name": "Physiotherapy session", "duration_min": 45, "price_cents": 9500,
             "description": "Assessment and treatment of muscle and joint problems.",
             "keywords": ["physio", "physical therapy"]}],
        "schedules": [{"practitioner": "Dr. Ana Sousa", "location": "Harbour",
                       "days": list(DAYS), "blocks": [list(hours)],
                       "offers": ["Consultation", "Physiotherapy session"]}],
    })


async def add_clinic(db: Database, workspace_id: str, zone: str, opens: clock,
                     closes: clock) -> Clinic:
    """The clinic, imported from its file as `python main.py clinic import` imports it."""
    number = new_number()
    source = clinic_file(f"Harbour Clinic {uuid.uuid4().hex[:4]}", number, zone, opens, closes)
    result = await import_clinic(db.pool, workspace_id, parse_clinic_text(source))
    return Clinic(result.service_id, number, zone)


@asynccontextmanager
async def service_and_twilio(db: Database, twilio: FakeTwilioRest, data_dir: Path, *,
                             env: dict[str, str] | None = None,
                             port: int | None = None) -> AsyncIterator[ServiceProcess]:
    """The stand-in served, and the real service (`python main.py serve`) pointed at it:
    it checks the stand-in's signatures and places its calls there. `env`: more settings."""
    port = port or free_port()
    async with serve_twilio_rest(twilio) as twilio_url:
        service = await asyncio.to_thread(start_service, {
            "DATABASE_URL": db.dsn, "DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO",
            "PUBLIC_URL": f"http://127.0.0.1:{port}", **twilio.service_env(twilio_url),
            **(env or {}),
        }, data_dir / "service.log", timeout_s=180, port=port)
        try:
            yield service
        finally:
            await asyncio.to_thread(service.stop)


async def eventually(what: str, check: Callable[[], Awaitable[T | None]], timeout_s: float,
                     log: Callable[[], str] = lambda: "") -> T:
    """`check()`'s first answer that is not None, polled until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = await check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s\n{log()[-6000:]}")
        await asyncio.sleep(POLL_S)


async def api_get(service: ServiceProcess, key: str, path: str) -> dict:
    """GET `path` as a dashboard would: a 503 (the database slow to answer, on a loaded
    machine) is asked again, for up to UNAVAILABLE_RETRY_S."""
    deadline = time.monotonic() + UNAVAILABLE_RETRY_S
    async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
        while True:
            response = await http.get(path, headers={"Authorization": f"Bearer {key}"})
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_S)
    assert response.status_code == 200, (path, response.status_code, response.text)
    return response.json()


async def closed_record(service: ServiceProcess, key: str, call_id: str) -> dict:
    """A call's record (GET /api/calls/{id}) once the call is closed."""

    async def closed() -> dict | None:
        record = await api_get(service, key, f"/api/calls/{call_id}")
        return record if record.get("completion_reason") else None

    return await eventually(f"call {call_id} closed", closed, 30, service.log)


def local_now(zone: str) -> datetime:
    from zoneinfo import ZoneInfo

    return datetime.now(ZoneInfo(zone))
