"""Proposed keyterms: words the real-time recognizer kept missing, per service, with the
evidence (what it wrote instead, in which calls), for an operator to accept or reject.

`GET /api/stt-suggestions` lists them (any role); `POST …/{id}/accept` adds the term to
its service's keyterms, so the service's next call is given it, and `POST …/{id}/reject`
keeps it from being proposed again (operator or above, each audited in the decision's
own transaction: runner/keyterm_decisions.py). Another workspace's suggestion is "not
found".
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query, status
from loguru import logger
from pydantic import BaseModel, Field

from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from db import stt_suggestions as suggestions
from runner import keyterm_decisions as decisions
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/stt-suggestions", tags=["speech recognition"],
                   responses=AUTH_RESPONSES)
READ_ONLY = require_role(Role.READ_ONLY)
OPERATOR = require_role(Role.OPERATOR)
MAX_LISTED = 500


class EvidenceOut(BaseModel):
    call_id: str
    heard: str = Field(description='What the real-time recognizer wrote instead ("": nothing)')
    at_ms: int | None = Field(description="Where in the call's recording")
    source: str = Field(description='Who found it: "verification", or the analysis source')


class SuggestionOut(BaseModel):
    id: str
    service_id: str
    term: str
    status: Literal["proposed", "accepted", "rejected"]
    evidence: list[EvidenceOut] = Field(description="The newest sightings, oldest first")
    calls_missed: int = Field(description="Calls the term was missed in")
    score: float = Field(description="Weight of the evidence (unsure real-time words and "
                         "the clinic's own names weigh more); the list's order")
    first_seen: datetime
    last_seen: datetime
    decided_at: datetime | None
    decided_by: str | None


class DecisionOut(BaseModel):
    suggestion: SuggestionOut
    service_keyterms: list[str] = Field(description="The service's own keyterms now")
    changed: bool = Field(description="False: it already had that status")


@router.get("", response_model=list[SuggestionOut])
async def list_suggestions(
    status_: Literal["proposed", "accepted", "rejected"] | None = Query(
        default=None, alias="status"),
    service_id: str | None = Query(default=None, max_length=64),
    limit: int = Query(default=200, ge=1, le=MAX_LISTED),
    caller: Caller = Depends(READ_ONLY),
    runtime: AppRuntime = Depends(get_runtime),
) -> list[dict]:
    """The workspace's suggestions, strongest evidence first."""
    return await runtime.db.bounded(
        suggestions.list_suggestions(runtime.db.pool, caller.workspace_id, status=status_,
                                     service_id=service_id, limit=limit),
        what="keyterm suggestions read")


async def _decide(decide, suggestion_id: str, caller: Caller, runtime: AppRuntime,
                  verb: str) -> DecisionOut:
    try:
        decision = await runtime.db.bounded(
            decide(runtime.db.pool, caller.workspace_id, suggestion_id, caller.actor),
            what=f"keyterm suggestion {verb}")
    except decisions.SuggestionNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "suggestion not found") from None
    except decisions.DecisionRefused as refused:
        raise HTTPException(status.HTTP_409_CONFLICT, str(refused)) from None
    if decision.changed:
        logger.info(f"keyterm suggestion {suggestion_id} {verb}ed by {caller.actor}")
    return DecisionOut(suggestion=SuggestionOut.model_validate(decision.suggestion),
                       service_keyterms=decision.service_keyterms, changed=decision.changed)


_DECISION_RESPONSES = {404: {"description": "No such suggestion in this workspace"},
                       409: {"description": "Not possible as things stand (the detail says "
                                            "why: the service's keyterms are full, or the "
                                            "term was accepted already)"}}


@router.post("/{suggestion_id}/accept", response_model=DecisionOut,
             responses=_DECISION_RESPONSES)
async def accept_suggestion(suggestion_id: str, caller: Caller = Depends(OPERATOR),
                            runtime: AppRuntime = Depends(get_runtime)) -> DecisionOut:
    """Add the term to its service's keyterms: the service's next call is given it."""
    return await _decide(decisions.accept, suggestion_id, caller, runtime, "accept")


@router.post("/{suggestion_id}/reject", response_model=DecisionOut,
             responses=_DECISION_RESPONSES)
async def reject_suggestion(suggestion_id: str, caller: Caller = Depends(OPERATOR),
                            runtime: AppRuntime = Depends(get_runtime)) -> DecisionOut:
    """Never propose the term for this service again."""
    return await _decide(decisions.reject, suggestion_id, caller, runtime, "reject")
