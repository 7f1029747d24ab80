"""Queries of the control plane: a workspace's services and their keyterms, and the
operator's actions on escalations.

Every query is scoped by the workspace id from the caller's API key: a row of another
workspace is "not found" (None), never an error, so ids cannot be probed.
Escalation actions are idempotent: acknowledging twice keeps the first operator and
time; resolving keeps the first resolution time (`EscalationAction.changed` says
whether this action changed anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from db.repositories import SERVICE_COLUMNS, _row_or_none, _rows, as_uuid

EscalationStatus = Literal["open", "acknowledged", "resolved"]
_ESCALATION_COLUMNS = """e.id, e.call_id, e.seq, e.concept, e.severity, e.similarity, e.judge,
       e.reason, e.at_ms, e.status, e.created_at, e.acknowledged_at, e.acknowledged_by,
       e.resolved_at"""
# An escalation of the workspace's calls: $1 the escalation id, $2 the workspace.
_OWN_ESCALATION = "e.id = $1 AND e.call_id IN (SELECT id FROM calls WHERE workspace_id = $2)"


# --- Services ------------------------------------------------------------------


async def list_services(pool: asyncpg.Pool, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's services, oldest first (the first is where unknown numbers land)."""
    return _rows(await pool.fetch(
        f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.workspace_id = $1 "
        "ORDER BY s.created_at, s.id", as_uuid(workspace_id)))


async def get_service(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                      service_id: str) -> dict[str, Any] | None:
    service = as_uuid(service_id)
    if service is None:
        return None
    return _row_or_none(await pool.fetchrow(
        f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.id = $1 AND s.workspace_id = $2",
        service, as_uuid(workspace_id)))


async def set_service_keyterms(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                               service_id: str, keyterms: list[str]) -> dict[str, Any] | None:
    """Replace the service's keyterms (already cleaned); None when it is not the
    workspace's service."""
    service = as_uuid(service_id)
    if service is None:
        return None
    updated = await pool.fetchval(
        "UPDATE services SET keyterms = $3 WHERE id = $1 AND workspace_id = $2 RETURNING id",
        service, as_uuid(workspace_id), keyterms)
    return None if updated is None else await get_service(pool, workspace_id, service_id)


# --- Escalations ---------------------------------------------------------------


async def list_escalations(
    pool: asyncpg.Pool, workspace_id: str, *, status: EscalationStatus | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The workspace's escalations (all, or of one status), newest first."""
    return _rows(await pool.fetch(
        f"""SELECT {_ESCALATION_COLUMNS}
              FROM escalations e JOIN calls c ON c.id = e.call_id
             WHERE c.workspace_id = $1 AND ($2::text IS NULL OR e.status = $2)
             ORDER BY e.created_at DESC, e.id DESC LIMIT $3""",
        as_uuid(workspace_id), status, limit))


@dataclass(frozen=True)
class EscalationAction:
    """What an operator's action on an escalation did."""

    escalation: dict[str, Any] | None  # as it is now; None: not the workspace's
    changed: bool  # False: it already had that status (nothing to tell observers)


async def acknowledge_escalation(pool: asyncpg.Pool, workspace_id: str, escalation_id: int,
                                 operator: str) -> EscalationAction:
    """Mark an open escalation acknowledged by `operator`; an acknowledged or resolved
    one is left unchanged."""
    return await _act(pool, workspace_id, escalation_id, operator,
                      """UPDATE escalations e SET status = 'acknowledged', acknowledged_at = now(),
                                acknowledged_by = $3
                          WHERE {own} AND e.status = 'open' RETURNING e.id""")


async def resolve_escalation(pool: asyncpg.Pool, workspace_id: str, escalation_id: int,
                             operator: str) -> EscalationAction:
    """Close an escalation; whoever resolves an unacknowledged one has acknowledged it.
    A resolved one is left unchanged."""
    return await _act(pool, workspace_id, escalation_id, operator,
                      """UPDATE escalations e SET status = 'resolved', resolved_at = now(),
                                acknowledged_at = COALESCE(e.acknowledged_at, now()),
                                acknowledged_by = COALESCE(e.acknowledged_by, $3)
                          WHERE {own} AND e.status <> 'resolved' RETURNING e.id""")


async def _act(pool: asyncpg.Pool, workspace_id: str, escalation_id: int, operator: str,
               update: str) -> EscalationAction:
    """Run one action's UPDATE (`{own}`: the workspace's escalation $1; $3 the operator)
    and read the escalation as it is now."""
    changed = await pool.fetchval(update.format(own=_OWN_ESCALATION), escalation_id,
                                  as_uuid(workspace_id), operator)
    return EscalationAction(await get_escalation(pool, workspace_id, escalation_id),
                            changed is not None)


async def get_escalation(pool: asyncpg.Pool, workspace_id: str, escalation_id: int
                         ) -> dict[str, Any] | None:
    return _row_or_none(await pool.fetchrow(
        f"SELECT {_ESCALATION_COLUMNS} FROM escalations e WHERE {_OWN_ESCALATION}",
        escalation_id, as_uuid(workspace_id)))

