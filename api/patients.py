"""Finding a patient to call (`GET /api/patients?q=`), for the new task form: by part of
the name or of the number. An operator's lookup, since it is what making a task needs;
only the workspace's own patients, at most a few at a time."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from db import task_views
from runner.runtime import AppRuntime

MAX_MATCHES = 20

router = APIRouter(prefix="/api/patients", tags=["outbound tasks"], responses=AUTH_RESPONSES)


class PatientOut(BaseModel):
    id: str
    name: str
    date_of_birth: date
    phone: str | None


@router.get("", response_model=list[PatientOut])
async def find_patients(
    q: str = Query(min_length=2, max_length=100, pattern=r"^[^\x00]*\S[^\x00]*$",
                   description="Part of the name, or three or more digits of the number"),
    limit: int = Query(default=10, ge=1, le=MAX_MATCHES),
    caller: Caller = Depends(require_role(Role.OPERATOR)),
    runtime: AppRuntime = Depends(get_runtime),
) -> list[Any]:
    """The workspace's patients matching `q`, by name."""
    return await runtime.db.bounded(
        task_views.find_patients(runtime.db.pool, caller.workspace_id, q, limit=limit),
        what="patient search")
