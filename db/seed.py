"""The demo workspace: a clinic you can call right after `make run`.

Its number is in the 555-01xx range, reserved for fiction; nothing here is a real
phone number. Re-running is safe: what exists is found and left as it is, so
edits made since (greeting, keyterms, voice settings) survive a re-seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from db import repositories as repo

DEMO_WORKSPACE = "demo"
DEMO_CLINIC = "Demo Family Clinic"
DEMO_NUMBER = "+15550100100"
DEMO_KEYTERMS = (
    "Demo Family Clinic", "checkup", "physical", "physiotherapy", "blood test",
    "vaccination", "flu shot", "follow-up", "new patient",
)


@dataclass(frozen=True)
class SeedResult:
    workspace_id: str
    service_id: str

    def __str__(self) -> str:
        return f"workspace {DEMO_WORKSPACE} ({self.workspace_id}), service {DEMO_CLINIC}"


async def is_empty(pool: asyncpg.Pool) -> bool:
    """No workspace yet: a first start, which may seed the demo."""
    return not await pool.fetchval("SELECT EXISTS (SELECT 1 FROM workspaces)")


async def seed_demo(pool: asyncpg.Pool) -> SeedResult:
    """Create (or find) the demo workspace, its clinic service and default voice settings."""
    workspace = await repo.ensure_workspace(pool, DEMO_WORKSPACE)
    service = await repo.get_service_by_name(pool, workspace["id"], DEMO_CLINIC)
    if service is None:
        service = await repo.create_service(
            pool, workspace["id"], DEMO_CLINIC, phone_number=DEMO_NUMBER,
            keyterms=list(DEMO_KEYTERMS),
        )
    if await repo.get_voice_settings_raw(pool, workspace["id"]) is None:
        await repo.set_voice_settings(pool, workspace["id"], {})
    return SeedResult(workspace_id=workspace["id"], service_id=service["id"])
