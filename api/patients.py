"""Finding a patient to call (`GET /api/patients?q=`), for the new task form: by part of
the name or of the number. An operator's lookup, since it is what making a task needs;
only the workspace's own patients, at most a few at a time.

Erasing a patient (`DELETE /api/patients/{id}`, the right to erasure) is an admin's: the
record and everything held about them go (db/erasure.py), audited by id only."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from loguru import logger
from pydantic import BaseModel

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from db import audit, task_views
from db.erasure import erase_patient
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


@router.delete("/{patient_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"description": "No such patient in this workspace"}})
async def delete_patient(
    patient_id: str,
    caller: Caller = Depends(require_role(Role.ADMIN)),
    runtime: AppRuntime = Depends(get_runtime),
) -> Response:
    """Erase the patient and everything held about them (memories, reminders, bookings,
    chart, call analyses); their calls stay, no longer naming them."""
    async def erase(conn) -> bool:
        erased = await erase_patient(conn, caller.workspace_id, patient_id)
        if erased:
            await audit.record_change(conn, caller.workspace_id, actor=caller.actor,
                                      action="patient.erase", target=patient_id)
        return erased

    if not await in_transaction(runtime, erase, what="patient erase"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "patient not found")
    logger.info(f"workspace {caller.workspace_id}: patient {patient_id} erased")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
