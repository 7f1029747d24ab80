"""Clinics for answer-webhook tests: a service with a location (a service without one,
like the demo's check-in line, is no clinic), reached by its own number."""

from __future__ import annotations

import uuid

from db import repositories as repo


def new_number() -> str:
    """A fictional number (555) no other test uses."""
    return f"+1555{uuid.uuid4().int % 10**7:07d}"


async def add_clinic(pool, workspace_id: str, name: str, number: str | None = None) -> dict:
    """A clinic in `workspace_id` with one location, owning `number` (a new one if None)."""
    service = await repo.create_service(pool, workspace_id, name,
                                        phone_number=number or new_number())
    await pool.execute(
        "INSERT INTO locations (service_id, name, timezone) VALUES ($1, 'Main', 'UTC')",
        repo.as_uuid(service["id"]))
    return service


async def several_clinics(pool) -> None:
    """Make sure the deployment has more than one clinic (the shared test database may
    hold any number): a call to a number nobody owns is then answered by no rule."""
    for _ in range(2):
        workspace = await repo.create_workspace(pool, f"ws-{uuid.uuid4().hex[:8]}")
        await add_clinic(pool, workspace["id"], "Another Clinic")
