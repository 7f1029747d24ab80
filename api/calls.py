"""Read API for call records (extended by the operations issue). API key required."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, HTTPException, Query, status

from api.deps import get_runtime, require_workspace
from db import repositories as repo
from services.runtime import AppRuntime

router = APIRouter(prefix="/api/calls", tags=["calls"])


@router.get("")
async def list_calls(
    limit: int = Query(default=50, ge=1, le=500),
    before: datetime | None = Query(default=None, description="Only calls started before this"),
    workspace_id: str = Depends(require_workspace),
    runtime: AppRuntime = Depends(get_runtime),
) -> dict:
    calls = await repo.list_calls(runtime.db.pool, workspace_id, limit=limit, before=before)
    return {"calls": calls}


@router.get("/{call_id}")
async def call_detail(
    call_id: str,
    workspace_id: str = Depends(require_workspace),
    runtime: AppRuntime = Depends(get_runtime),
) -> dict:
    detail = await repo.get_call_detail(runtime.db.pool, call_id, workspace_id)
    if detail is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "call not found")
    return detail
