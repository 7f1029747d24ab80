"""API key management for the caller's own workspace: list, create (the key is shown
once), revoke. A key revoked here stops working on this pod at once (the cache forgets
it) and on other pods within the key cache's TTL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from loguru import logger
from pydantic import BaseModel, Field

from api.deps import AUTH_RESPONSES, get_runtime, key_cache, require_workspace
from db import repositories as repo
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/keys", tags=["api keys"], responses=AUTH_RESPONSES)


class ApiKeyOut(BaseModel):
    """A key as listed: never its secret or hash."""

    id: str
    name: str
    prefix: str = Field(description="The 8 hex characters after `vk_`, to tell keys apart.")
    created_at: datetime
    last_used_at: datetime | None = Field(
        default=None, description="Updated at most once a minute.")
    revoked_at: datetime | None = None


class ApiKeyCreate(BaseModel):
    name: str = Field(default="", max_length=100, description="What the key is for.")


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="The key itself; shown only in this response.")


@router.get("", response_model=list[ApiKeyOut])
async def list_keys(
    workspace_id: str = Depends(require_workspace),
    runtime: AppRuntime = Depends(get_runtime),
) -> list[dict[str, Any]]:
    # Rows as they are: `response_model` validates and serialises them once.
    return await runtime.db.bounded(repo.list_api_keys(runtime.db.pool, workspace_id),
                                    what="API keys read")


@router.post("", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED,
             responses={400: {"description": "The body could not be read as JSON"}})
async def create_key(
    body: ApiKeyCreate,
    workspace_id: str = Depends(require_workspace),
    runtime: AppRuntime = Depends(get_runtime),
) -> ApiKeyCreated:
    plaintext = await runtime.db.bounded(
        repo.create_api_key(runtime.db.pool, workspace_id, body.name), what="API key create")
    row = await runtime.db.bounded(repo.get_api_key(runtime.db.pool, plaintext),
                                   what="API key read")
    logger.info("api key {} created", row["prefix"])
    return ApiKeyCreated(**row, key=plaintext)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"description": "No such unrevoked key in this workspace"}})
async def revoke_key(
    key_id: str,
    request: Request,
    workspace_id: str = Depends(require_workspace),
    runtime: AppRuntime = Depends(get_runtime),
) -> None:
    """Revoke a key by id (or by its prefix); the caller may revoke the key it uses."""
    revoked = await runtime.db.bounded(
        repo.revoke_api_key_by_id(runtime.db.pool, workspace_id, key_id), what="API key revoke")
    if revoked is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "key not found")
    key_cache(request.app).forget(revoked["key_hash"])
    logger.info("api key {} revoked", revoked["id"])
