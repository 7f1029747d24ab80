"""The audit log over HTTP (`GET /api/audit`, admin), and the transaction an admin
change shares with its audit row (`in_transaction`), so neither is ever on record
without the other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from db import audit
from db import repositories as repo
from runner.runtime import AppRuntime

T = TypeVar("T")
MAX_AUDIT_ID = 2**63 - 1

router = APIRouter(prefix="/api/audit", tags=["audit log"], responses=AUTH_RESPONSES)


async def in_transaction(runtime: AppRuntime, work: Callable[[asyncpg.Connection], Awaitable[T]],
                         *, what: str, timeout: float | None = None) -> T:
    """`work` on one connection inside one transaction, bounded like any database call:
    a change and its audit row commit together or not at all."""
    async def run() -> T:
        async with runtime.db.pool.acquire() as conn, conn.transaction():
            return await work(conn)

    return await runtime.db.bounded(run(), what=what, timeout=timeout)


class AuditEntry(BaseModel):
    id: int
    actor: str = Field(description='"key vk_<prefix>" or "cli"')
    action: str = Field(description='e.g. "voice_settings.replace", "api_key.create"')
    target: str
    before: Any = Field(description="The state before the change (null: none)")
    after: Any = Field(description="The state after it (null: none)")
    at: datetime


class AuditPage(BaseModel):
    entries: list[AuditEntry] = Field(description="Newest first")
    next_before: int | None = Field(
        description="Pass as `before` for the next (older) page; null: no more")


@router.get("", response_model=AuditPage)
async def list_audit(
    limit: int = Query(default=50, ge=1, le=repo.MAX_LIST_LIMIT),
    before: int | None = Query(default=None, ge=1, le=MAX_AUDIT_ID,
                               description="Only entries older than this id"),
    caller: Caller = Depends(require_role(Role.ADMIN)),
    runtime: AppRuntime = Depends(get_runtime),
) -> dict[str, Any]:
    """Who changed the workspace's set-up, what, from what to what and when."""
    rows = await runtime.db.bounded(
        audit.list_changes(runtime.db.pool, caller.workspace_id, limit=limit + 1,
                           before_id=before), what="audit log read")
    page = rows[:limit]
    return {"entries": page, "next_before": page[-1]["id"] if len(rows) > limit else None}
