"""A workspace for the outbound task and reminder tests: a clinic imported from its file,
a patient with a number, keys of each role, and tasks made as the service makes them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from db import outbound
from db import repositories as repo
from db.clinic.file import parse_clinic_text
from db.clinic.store import import_clinic
from tests.api.test_clinics_api import clinic_text, fictional_number


@dataclass(frozen=True)
class World:
    workspace_id: str
    clinic_id: str
    patient_id: str
    keys: dict[str, str]  # role -> key


async def add_patient(pool, workspace_id: str, first: str = "Ada", last: str = "Byron", *,
                      phone: str | None = None, timezone: str | None = None) -> str:
    return str(await pool.fetchval(
        "INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone, "
        "timezone) VALUES ($1, $2, $3, '1970-01-02', $4, $5) RETURNING id",
        uuid.UUID(workspace_id), f"{first}{uuid.uuid4().hex[:4]}", last,
        phone or fictional_number(), timezone))


async def add_clinic(pool, workspace_id: str) -> str:
    source = clinic_text(f"Quayside {uuid.uuid4().hex[:6]}", fictional_number())
    return (await import_clinic(pool, workspace_id, parse_clinic_text(source))).service_id


async def new_world(db) -> World:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    workspace_id = workspace["id"]
    keys = {role: await repo.create_api_key(db.pool, workspace_id, f"{role} key", role=role)
            for role in ("read_only", "operator", "admin")}
    return World(workspace_id, await add_clinic(db.pool, workspace_id),
                 await add_patient(db.pool, workspace_id), keys)


def later(hours: float = 48) -> datetime:
    """A time far enough ahead that no dialer picks the task up during a test."""
    return datetime.now(UTC) + timedelta(hours=hours)


async def make_task(db, world: World, **changes) -> str:
    """A task as the service makes one (through `db.outbound.create_task`)."""
    values = dict(workspace_id=world.workspace_id, service_id=world.clinic_id, kind="callback",
                  reason="asked for a call back", goal="answer their billing question",
                  timezone="Europe/London", not_before=later(), patient_id=world.patient_id)
    async with db.pool.acquire() as conn, conn.transaction():
        return await outbound.create_task(conn, outbound.TaskSpec(**{**values, **changes}))
