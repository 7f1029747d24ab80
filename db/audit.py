"""The audit log: who changed a workspace's set-up, what, from what to what, and when.

Written in the same transaction as the change when the caller passes its connection, so
a change is never on record without its audit row, nor the other way round.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from db.repositories import _rows, as_uuid

Executor = asyncpg.Pool | asyncpg.Connection
CLI_ACTOR = "cli"


async def record_change(executor: Executor, workspace_id: str, *, actor: str, action: str,
                        target: str = "", before: Any = None, after: Any = None) -> None:
    """One audit row. `before`/`after` are JSON-ready values (None: nothing there);
    never secrets or patients' details."""
    await executor.execute(
        """INSERT INTO audit_log (workspace_id, actor, action, target, before, after)
           VALUES ($1, $2, $3, $4, $5, $6)""",
        as_uuid(workspace_id), actor, action, target, before, after)


async def list_changes(pool: asyncpg.Pool, workspace_id: str, *, limit: int = 50,
                       before_id: int | None = None) -> list[dict[str, Any]]:
    """The workspace's audit rows, newest first; `before_id` pages back."""
    return _rows(await pool.fetch(
        """SELECT id, actor, action, target, before, after, at FROM audit_log
           WHERE workspace_id = $1 AND ($2::bigint IS NULL OR id < $2)
           ORDER BY id DESC LIMIT $3""", as_uuid(workspace_id), before_id, limit))
