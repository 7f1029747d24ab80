"""Workspaces over HTTP: who the key is (`GET /api/me`, any role), the workspaces an
admin may see (its own and those it created), and a new workspace with its first admin
key (shown once: nobody could reach the workspace otherwise). A workspace created here
is recorded with its creator and audited in both workspaces."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
from fastapi import APIRouter, Depends, HTTPException, status
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from api.keys import ApiKeyCreated, key_summary
from db import audit, workspaces
from db import repositories as repo
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api", tags=["workspaces"], responses=AUTH_RESPONSES)
FIRST_KEY_NAME = "first admin key"


class Me(BaseModel):
    workspace_id: str
    workspace_name: str
    role: Role
    key_prefix: str = Field(description="The 8 hex characters after `vk_`")


class WorkspaceOut(BaseModel):
    id: str
    name: str
    created_at: datetime


class WorkspaceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description=f"1-{workspaces.NAME_MAX} characters once trimmed, no "
                      "control characters; unique.")

    @field_validator("name")
    @classmethod
    def _valid(cls, name: str) -> str:
        return workspaces.clean_workspace_name(name)


class WorkspaceCreated(BaseModel):
    workspace: WorkspaceOut
    admin_key: ApiKeyCreated = Field(description="The new workspace's first admin key; "
                                     "shown only in this response.")


@router.get("/me", response_model=Me)
async def me(caller: Caller = Depends(require_role(Role.READ_ONLY)),
             runtime: AppRuntime = Depends(get_runtime)) -> Me:
    """The key's workspace and role (the dashboard shows only what the role may use)."""
    workspace = await runtime.db.bounded(
        workspaces.get_workspace(runtime.db.pool, caller.workspace_id), what="workspace read")
    if workspace is None:  # deleted since the key was cached
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid API key",
                            headers={"WWW-Authenticate": "Bearer"})
    return Me(workspace_id=caller.workspace_id, workspace_name=workspace["name"],
              role=caller.role, key_prefix=caller.key_prefix)


@router.get("/workspaces", response_model=list[WorkspaceOut])
async def list_workspaces(caller: Caller = Depends(require_role(Role.ADMIN)),
                          runtime: AppRuntime = Depends(get_runtime)) -> list[dict[str, Any]]:
    """The key's own workspace first, then those its admins created; never another."""
    return await runtime.db.bounded(
        workspaces.visible_workspaces(runtime.db.pool, caller.workspace_id),
        what="workspaces read")


@router.post("/workspaces", response_model=WorkspaceCreated,
             status_code=status.HTTP_201_CREATED,
             responses={409: {"description": "The name is taken"}})
async def create_workspace(body: WorkspaceIn,
                           caller: Caller = Depends(require_role(Role.ADMIN)),
                           runtime: AppRuntime = Depends(get_runtime)) -> WorkspaceCreated:
    async def create(conn: asyncpg.Connection) -> tuple[dict[str, Any], str, dict[str, Any]]:
        workspace = await repo.create_workspace(conn, body.name,
                                                created_by=caller.workspace_id)
        plaintext = await repo.create_api_key(conn, workspace["id"], FIRST_KEY_NAME,
                                              role=Role.ADMIN)
        key = await repo.get_api_key(conn, plaintext)
        created = {"id": workspace["id"], "name": workspace["name"]}
        await audit.record_change(conn, caller.workspace_id, actor=caller.actor,
                                  action="workspace.create", target=workspace["id"],
                                  after=created)
        await audit.record_change(conn, workspace["id"], actor=caller.actor,
                                  action="workspace.create", target=workspace["id"],
                                  after={**created, "created_by": caller.workspace_id,
                                         "admin_key": key_summary(key)})
        return workspace, plaintext, key

    try:
        workspace, plaintext, key = await in_transaction(runtime, create,
                                                         what="workspace create")
    except asyncpg.UniqueViolationError:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"a workspace named {body.name!r} exists") from None
    logger.info(f"workspace {workspace['id']} created by workspace {caller.workspace_id}")
    return WorkspaceCreated(workspace=WorkspaceOut(**workspace),
                            admin_key=ApiKeyCreated(**key, key=plaintext))
