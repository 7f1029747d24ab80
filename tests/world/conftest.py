"""World-model fixtures: the demo clinic with its charts, a call, its transcript."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime

import pytest

from db import repositories as repo
from db import world
from db.seed import seed_clinic, seed_world
from db.world import PatientRecord
from processors.world.index import WorldIndex
from services.embeddings import LocalEmbedder

TODAY = date(2026, 11, 23)
NOW = datetime(2026, 11, 23, 15, 0, tzinfo=UTC)  # 9 AM in Chicago, the same day


@dataclass
class Clinic:
    workspace_id: str
    service_id: str

    async def patient(self, db, first: str, last: str) -> PatientRecord:
        row = await db.pool.fetchrow(
            "SELECT id FROM patients WHERE workspace_id = $1 AND first_name = $2 AND "
            "last_name = $3", uuid.UUID(self.workspace_id), first, last)
        return (await world.patients_by_ids(db.pool, [str(row["id"])]))[0]

    async def call(self, db) -> str:
        return await repo.create_call(
            db.pool, workspace_id=self.workspace_id, service_id=self.service_id, call_sid=None,
            direction="inbound", from_number=None, to_number=None, status="completed")


@pytest.fixture
async def clinic(db, workspace_id) -> Clinic:
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    assert await seed_clinic(db.pool, workspace_id, service["id"], date.today())
    assert await seed_world(db.pool, workspace_id)
    return Clinic(workspace_id, service["id"])


@pytest.fixture(scope="session")
async def index(db) -> WorldIndex:
    index = WorldIndex(LocalEmbedder())
    await index.prepare(db.pool)
    return index


async def transcript(db, call_id: str, *turns: tuple[str, str]) -> None:
    """Store a call's turns: ("caller" | "agent", text) in order."""
    await db.pool.executemany(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) "
        "VALUES ($1, $2, $3, $3, $4)",
        [(uuid.UUID(call_id), seq, role, text) for seq, (role, text) in enumerate(turns, 1)])
