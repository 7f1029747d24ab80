"""What every database command needs: a migrated database for the command's life, and a
workspace found by name."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

from config import Settings
from db import repositories as repo
from db.migrations import apply_migrations
from db.pool import Database
from lib import event_loop


def run_with_database(settings: Settings, action: Callable[[Database], Awaitable[int]]) -> int:
    """Connect (starting the embedded server when configured), migrate, run `action`, close;
    its return value is the exit status."""
    async def with_database() -> int:
        db = await Database.connect(settings)
        try:
            await apply_migrations(db.pool)
            return await action(db)
        finally:
            await db.close()

    return event_loop.run(with_database())


async def find_workspace_id(db: Database, name: str) -> str | None:
    """The id of the workspace called `name`, or None after saying there is none."""
    found = await repo.get_workspace_by_name(db.pool, name)
    if found is None:
        print(f"no workspace named {name!r}", file=sys.stderr)
        return None
    return found["id"]
