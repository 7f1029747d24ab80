"""An operator's decision on a proposed keyterm, with its audit row in one transaction.

Accepting appends the term to its service's keyterms (merged like any keyterm list, at
most `MAX_KEYTERMS`), so the service's next call is given it: a call's profile reads the
service row when the call starts. Rejecting keeps the term from being proposed again.
An accepted term cannot be rejected here: it is a keyterm now, removed by editing the
service's keyterms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from db import audit, control
from db import stt_suggestions as suggestions
from services.keyterms import MAX_KEYTERMS, merge_keyterms


class SuggestionNotFound(LookupError):
    """No such suggestion in this workspace."""


class DecisionRefused(Exception):
    """The decision cannot be taken as things stand (the API answers 409)."""


@dataclass(frozen=True)
class Decision:
    suggestion: dict[str, Any]  # as it is now
    service_keyterms: list[str]  # the service's own keyterm layer, now
    changed: bool  # False: it already had that status


async def accept(pool: asyncpg.Pool, workspace_id: str, suggestion_id: str,
                 actor: str) -> Decision:
    """Make the term a keyterm of its service. DecisionRefused when the service already
    has `MAX_KEYTERMS`; accepting twice changes nothing."""
    async with pool.acquire() as conn, conn.transaction():
        found = await _locked(conn, workspace_id, suggestion_id)
        service = await control.get_service(conn, workspace_id, found["service_id"])
        if service is None:
            raise SuggestionNotFound(suggestion_id)
        before = list(service["keyterms"])
        if found["status"] == "accepted":
            return Decision(found, before, changed=False)
        after = merge_keyterms(before, [found["term"]], limit=MAX_KEYTERMS + 1)
        if len(after) > MAX_KEYTERMS:
            raise DecisionRefused(
                f"the service has {MAX_KEYTERMS} keyterms already, the most a call can be "
                "given; remove one from the service's keyterms before accepting another")
        if after != before:
            await control.set_service_keyterms(conn, workspace_id, found["service_id"], after)
        decided = await suggestions.set_status(conn, workspace_id, suggestion_id, "accepted",
                                               actor)
        await audit.record_change(conn, workspace_id, actor=actor,
                                  action="stt_suggestion.accept", target=found["id"],
                                  before={"term": found["term"], "status": found["status"],
                                          "keyterms": before},
                                  after={"term": found["term"], "status": "accepted",
                                         "keyterms": after})
    return Decision(decided or found, after, changed=True)


async def reject(pool: asyncpg.Pool, workspace_id: str, suggestion_id: str,
                 actor: str) -> Decision:
    """Never propose the term again. DecisionRefused for an accepted term; rejecting
    twice changes nothing."""
    async with pool.acquire() as conn, conn.transaction():
        found = await _locked(conn, workspace_id, suggestion_id)
        service = await control.get_service(conn, workspace_id, found["service_id"])
        keyterms = list(service["keyterms"]) if service is not None else []
        if found["status"] == "accepted":
            raise DecisionRefused("the term was accepted and is a keyterm of the service; "
                                  "remove it from the service's keyterms instead")
        if found["status"] == "rejected":
            return Decision(found, keyterms, changed=False)
        decided = await suggestions.set_status(conn, workspace_id, suggestion_id, "rejected",
                                               actor)
        await audit.record_change(conn, workspace_id, actor=actor,
                                  action="stt_suggestion.reject", target=found["id"],
                                  before={"term": found["term"], "status": found["status"]},
                                  after={"term": found["term"], "status": "rejected"})
    return Decision(decided or found, keyterms, changed=True)


async def _locked(conn: asyncpg.Connection, workspace_id: str,
                  suggestion_id: str) -> dict[str, Any]:
    found = await suggestions.get_suggestion(conn, workspace_id, suggestion_id,
                                             for_update=True)
    if found is None:
        raise SuggestionNotFound(suggestion_id)
    return found
