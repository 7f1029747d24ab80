"""API key management for the caller's own workspace (admin keys only): list, create (the
key is shown once), revoke. A key made here is read-only unless the request names
another role (least privilege). A key revoked here stops working on this pod at once (the
cache forgets it) and on other pods within the key cache's TTL. Creating and revoking are
audited (name, prefix and role; never the key or its hash)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from loguru import logger
from pydantic import BaseModel, Field

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, key_cache, require_role
from db import audit
from db import repositories as repo
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/keys", tags=["api keys"], responses=AUTH_RESPONSES)
ADMIN = require_role(Role.ADMIN)


class ApiKeyOut(BaseModel):
    """A key as listed: never its secret or hash."""

    id: str
    name: str
    prefix: str = Field(description="The 8 hex characters after `vk_`, to tell keys apart.")
    role: Role
    created_at: datetime
    last_used_at: datetime | None = Field(
        default=None, description="Updated at most once a minute.")
    revoked_at: datetime | None = None


class ApiKeyCreate(BaseModel):
    name: str = Field(default="", max_length=100, description="What the key is for.")
    role: Role = Field(default=Role.READ_ONLY, description="What the key may do; "
                       "read_only unless named (admin ⊇ operator ⊇ read_only).")


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="The key itself; shown only in this response.")


def key_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A key as the audit log keeps it: never the secret or its hash."""
    return {"name": row["name"], "prefix": row["prefix"], "role": row["role"]}


@router.get("", response_model=list[ApiKeyOut])
async def list_keys(
    caller: Caller = Depends(ADMIN),
    runtime: AppRuntime = Depends(get_runtime),
) -> list[dict[str, Any]]:
    # Rows as they are: `response_model` validates and serialises them once.
    return await runtime.db.bounded(repo.list_api_keys(runtime.db.pool, caller.workspace_id),
                                    what="API keys read")


@router.post("", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED,
             responses={400: {"description": "The body could not be read as JSON"}})
async def create_key(
    body: ApiKeyCreate,
    caller: Caller = Depends(ADMIN),
    runtime: AppRuntime = Depends(get_runtime),
) -> ApiKeyCreated:
    async def create(conn) -> tuple[str, dict[str, Any]]:
        plaintext = await repo.create_api_key(conn, caller.workspace_id, body.name,
                                              role=body.role)
        row = await repo.get_api_key(conn, plaintext)
        await audit.record_change(conn, caller.workspace_id, actor=caller.actor,
                                  action="api_key.create", target=f"vk_{row['prefix']}",
                                  after=key_summary(row))
        return plaintext, row

    plaintext, row = await in_transaction(runtime, create, what="API key create")
    logger.info("api key {} ({}) created", row["prefix"], row["role"])
    return ApiKeyCreated(**row, key=plaintext)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"description": "No such unrevoked key in this workspace"}})
async def revoke_key(
    key_id: str,
    request: Request,
    caller: Caller = Depends(ADMIN),
    runtime: AppRuntime = Depends(get_runtime),
) -> None:
    """Revoke a key by id (or by its prefix); the caller may revoke the key it uses."""
    async def revoke(conn) -> dict[str, Any] | None:
        revoked = await repo.revoke_api_key_by_id(conn, caller.workspace_id, key_id)
        if revoked is not None:
            await audit.record_change(conn, caller.workspace_id, actor=caller.actor,
                                      action="api_key.revoke",
                                      target=f"vk_{revoked['prefix']}",
                                      before=key_summary(revoked))
        return revoked

    revoked = await in_transaction(runtime, revoke, what="API key revoke")
    if revoked is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "key not found")
    key_cache(request.app).forget(revoked["key_hash"])
    logger.info("api key {} revoked", revoked["id"])
