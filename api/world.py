"""The world model's trust layer over HTTP: a call's clinical events, re-running its
verification, and the review queue of flagged events. API key required; a key only
ever sees its own workspace's calls and events."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, status
from pydantic import BaseModel

from api.deps import Caller, Role, get_runtime, own_call, require_role
from db import world
from db.world import ClinicalEvent
from runner.after_call import verify_and_sync
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api", tags=["world model"])


class EventOut(BaseModel):
    id: str
    call_id: str | None
    patient_id: str | None
    type: str
    summary: str
    payload: dict[str, Any]
    occurred_at: datetime
    source: str
    written_by: str
    turn_seq: int | None
    confidence: str
    verification: str
    notes: list[dict[str, Any]]
    review_action: str | None = None  # what a person must do (in the practice system)


class VerificationOut(BaseModel):
    call_id: str
    classification: str
    reason: str
    judge: str
    counts: dict[str, int]
    flagged: dict[str, str]
    synced: dict[str, Any] | None


def _event(event: ClinicalEvent) -> EventOut:
    return EventOut(**{k: v for k, v in asdict(event).items()
                       if k in EventOut.model_fields})


@router.get("/calls/{call_id}/events", response_model=list[EventOut])
async def call_events(call_id: str, caller: Caller = Depends(require_role(Role.READ_ONLY)),
                      runtime: AppRuntime = Depends(get_runtime)) -> list[EventOut]:
    """What the call wrote, with each event's provenance and verification."""
    workspace_id = caller.workspace_id
    await own_call(runtime, call_id, workspace_id)
    events = await runtime.db.bounded(world.call_events(runtime.db.pool, call_id),
                                      what="call events read")
    return [_event(e) for e in events]


@router.post("/calls/{call_id}/verify", response_model=VerificationOut)
async def verify(call_id: str, caller: Caller = Depends(require_role(Role.OPERATOR)),
                 runtime: AppRuntime = Depends(get_runtime)) -> VerificationOut:
    """Run the three verification stages again, then sync what is verified."""
    workspace_id = caller.workspace_id
    await own_call(runtime, call_id, workspace_id)
    report, synced = await verify_and_sync(
        runtime.db.pool, call_id, runtime.verifier, runtime.practice,
        country_code=runtime.settings.world.phone_country_code)
    if report is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "call not found")
    return VerificationOut(
        call_id=call_id, classification=report.classification.label,
        reason=report.classification.reason, judge=report.judge, counts=report.counts,
        flagged=report.flagged, synced=asdict(synced) if synced is not None else None)


@router.get("/review-queue", response_model=list[EventOut])
async def review_queue(limit: int = Query(default=50, ge=1, le=500),
                       caller: Caller = Depends(require_role(Role.OPERATOR)),
                       runtime: AppRuntime = Depends(get_runtime)) -> list[EventOut]:
    """Flagged events awaiting a person, newest first: what verification flagged, and
    bookings the practice system never took, each with the action needed when a look is
    not enough (`review_action`)."""
    workspace_id = caller.workspace_id
    events = await runtime.db.bounded(
        world.review_queue(runtime.db.pool, workspace_id, limit=limit), what="review queue read")
    return [_event(e) for e in events]
