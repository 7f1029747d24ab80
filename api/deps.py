"""FastAPI dependencies shared by the routes: the runtime and API-key authentication."""

from __future__ import annotations

from fastapi import Depends, HTTPException, Request, status

from db import repositories as repo
from services.runtime import AppRuntime


def get_runtime(request: Request) -> AppRuntime:
    return request.app.state.runtime


async def require_workspace(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> str:
    """The workspace of a valid `Authorization: Bearer <api key>`; 401 otherwise."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    workspace_id = await repo.verify_api_key(runtime.db.pool, key.strip())
    if workspace_id is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "invalid API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return str(workspace_id)
