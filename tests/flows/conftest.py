"""Fixtures the conversation-engine tests share."""

import uuid
from datetime import date

import pytest

from db import repositories as repo
from db.seed import seed_clinic


@pytest.fixture
async def clinic(db, workspace_id):
    """A service of its own with the demo clinic seeded from today: (workspace, service)."""
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    await seed_clinic(db.pool, workspace_id, service["id"], date.today())
    return workspace_id, service["id"]
