"""The demo workspace: a clinic you can call right after `make run`.

Its number is in the 555-01xx range, reserved for fiction; nothing here is a real
phone number. Re-running is safe.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from db import repositories as repo

DEMO_WORKSPACE = "demo"
DEMO_CLINIC = "Demo Family Clinic"
DEMO_NUMBER = "+15550100100"
DEMO_KEYTERMS = ["Demo Family Clinic", "checkup", "physiotherapy", "blood test", "vaccination"]


@dataclass(frozen=True)
class SeedResult:
    workspace_id: str
    service_id: str

    def __str__(self) -> str:
        return f"workspace {DEMO_WORKSPACE} ({self.workspace_id}), service {DEMO_CLINIC}"


async def is_empty(pool: asyncpg.Pool) -> bool:
    return not await pool.fetchval("SELECT EXISTS (SELECT 1 FROM workspaces)")


async def seed_demo(pool: asyncpg.Pool) -> SeedResult:
    workspace = await repo.ensure_workspace(pool, DEMO_WORKSPACE)
    service = await repo.create_service(
        pool, workspace["id"], DEMO_CLINIC, phone_number=DEMO_NUMBER, keyterms=DEMO_KEYTERMS
    )
    if await repo.get_voice_settings_raw(pool, workspace["id"]) is None:
        await repo.set_voice_settings(pool, workspace["id"], {})
    return SeedResult(workspace_id=workspace["id"], service_id=service["id"])
