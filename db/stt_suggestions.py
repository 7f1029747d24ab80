"""Proposed keyterms per service: words the real-time recognizer kept missing, with evidence.

Any after-call source records what it found with `record_misheard` (the transcript
verification, a model reading the call). A term is one row per service whatever its
case; a rejected term is never proposed again and an accepted one is left as it is.
Each call counts once per source however often it is re-verified: `calls_missed` and
`score` are derived from `stt_suggestion_calls`. Evidence keeps the newest
`MAX_EVIDENCE` sightings; what a caller said (`heard`) stays in these rows.

Every read and decision is scoped by the caller's workspace: another workspace's
suggestion is "not found" (None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from db.repositories import _row_or_none, _rows, as_uuid

SuggestionStatus = Literal["proposed", "accepted", "rejected"]
Executor = asyncpg.Pool | asyncpg.Connection
MAX_EVIDENCE = 10
MAX_TERMS_PER_CALL = 50
MAX_TERM_CHARS = 60
MAX_HEARD_CHARS = 120
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_COLUMNS = """s.id, s.workspace_id, s.service_id, s.term, s.status, s.evidence,
              s.calls_missed, s.score, s.first_seen, s.last_seen, s.decided_at,
              s.decided_by"""


@dataclass(frozen=True)
class Misheard:
    """One sighting of a term the real-time side did not write: what it wrote instead
    (`heard`, "" for nothing), where in the recording (ms) and who found it. `weight`
    is how much this sighting says (a low-confidence real-time word says more)."""

    term: str
    heard: str
    at_ms: int | None
    source: str
    weight: float = 1.0


def clean_term(term: str) -> str | None:
    """The term as stored (whitespace collapsed), or None when it cannot be a keyterm."""
    cleaned = " ".join(str(term).split())
    if not 1 <= len(cleaned) <= MAX_TERM_CHARS or _CONTROL.search(cleaned):
        return None
    return cleaned


def _by_term(findings: list[Misheard]) -> dict[str, tuple[str, list[Misheard]]]:
    """Findings grouped case-insensitively: key -> (first spelling, sightings)."""
    grouped: dict[str, tuple[str, list[Misheard]]] = {}
    for finding in findings:
        term = clean_term(finding.term)
        if term is None:
            continue
        key = term.casefold()
        if key not in grouped:
            if len(grouped) >= MAX_TERMS_PER_CALL:
                continue
            grouped[key] = (term, [])
        grouped[key][1].append(finding)
    return grouped


def _evidence(call_id: str, sightings: list[Misheard]) -> list[dict[str, Any]]:
    return [{"call_id": call_id, "heard": _CONTROL.sub(" ", s.heard)[:MAX_HEARD_CHARS],
             "at_ms": s.at_ms, "source": s.source} for s in sightings]


def merged_evidence(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest `MAX_EVIDENCE` sightings: a call's earlier sightings from the same
    source give way to the new ones (a re-verification replaces, never repeats)."""
    again = {(item["call_id"], item["source"]) for item in new}
    kept = [item for item in old if (item.get("call_id"), item.get("source")) not in again]
    return (kept + new)[-MAX_EVIDENCE:]


async def record_misheard(pool: asyncpg.Pool, workspace_id: str, service_id: str,
                          call_id: str, findings: list[Misheard]) -> int:
    """Propose (or strengthen) each term of `findings` for the service; terms already
    among the service's keyterms, rejected or accepted are left alone. Returns how many
    proposed suggestions this call added to or created; 0 when the service is not the
    workspace's."""
    grouped = _by_term(findings)
    if not grouped:
        return 0
    workspace, service, call = as_uuid(workspace_id), as_uuid(service_id), as_uuid(call_id)
    async with pool.acquire() as conn, conn.transaction():
        keyterms = await conn.fetchval(
            "SELECT keyterms FROM services WHERE id = $1 AND workspace_id = $2",
            service, workspace)
        if keyterms is None:
            return 0
        known = {" ".join(t.split()).casefold() for t in keyterms}
        changed = 0
        for key, (term, sightings) in sorted(grouped.items()):
            if key in known:
                continue
            if await _add_sightings(conn, workspace, service, call, term, sightings):
                changed += 1
    return changed


async def _add_sightings(conn: asyncpg.Connection, workspace: Any, service: Any, call: Any,
                         term: str, sightings: list[Misheard]) -> bool:
    await conn.execute(
        """INSERT INTO stt_suggestions (workspace_id, service_id, term) VALUES ($1, $2, $3)
           ON CONFLICT (service_id, lower(term)) DO NOTHING""", workspace, service, term)
    row = await conn.fetchrow(
        """SELECT id, status, evidence FROM stt_suggestions
           WHERE service_id = $1 AND lower(term) = lower($2) FOR UPDATE""", service, term)
    if row["status"] != "proposed":
        return False
    for source in sorted({s.source for s in sightings}):
        weight = sum(s.weight for s in sightings if s.source == source)
        await conn.execute(
            """INSERT INTO stt_suggestion_calls (suggestion_id, call_id, source, weight)
               VALUES ($1, $2, $3, $4)
               ON CONFLICT (suggestion_id, call_id, source) DO UPDATE SET weight = $4""",
            row["id"], call, source, max(0.0, weight))
    evidence = merged_evidence(list(row["evidence"] or []), _evidence(str(call), sightings))
    await conn.execute(
        """UPDATE stt_suggestions s SET evidence = $2, last_seen = now(),
                  calls_missed = (SELECT count(DISTINCT call_id) FROM stt_suggestion_calls
                                  WHERE suggestion_id = s.id),
                  score = (SELECT coalesce(sum(weight), 0) FROM stt_suggestion_calls
                           WHERE suggestion_id = s.id)
           WHERE s.id = $1""", row["id"], evidence)
    return True


async def list_suggestions(pool: asyncpg.Pool, workspace_id: str, *,
                           status: SuggestionStatus | None = None,
                           service_id: str | None = None, limit: int = 200
                           ) -> list[dict[str, Any]]:
    """The workspace's suggestions (of one status, one service), strongest first."""
    if service_id is not None and as_uuid(service_id) is None:
        return []
    return _rows(await pool.fetch(
        f"""SELECT {_COLUMNS} FROM stt_suggestions s
            WHERE s.workspace_id = $1 AND ($2::text IS NULL OR s.status = $2)
              AND ($3::uuid IS NULL OR s.service_id = $3)
            ORDER BY s.score DESC, s.calls_missed DESC, s.last_seen DESC, s.id LIMIT $4""",
        as_uuid(workspace_id), status, as_uuid(service_id), limit))


async def get_suggestion(executor: Executor, workspace_id: str, suggestion_id: str, *,
                         for_update: bool = False) -> dict[str, Any] | None:
    suggestion = as_uuid(suggestion_id)
    if suggestion is None:
        return None
    lock = " FOR UPDATE" if for_update else ""
    return _row_or_none(await executor.fetchrow(
        f"SELECT {_COLUMNS} FROM stt_suggestions s WHERE s.id = $1 AND s.workspace_id = $2"
        f"{lock}", suggestion, as_uuid(workspace_id)))


async def set_status(executor: Executor, workspace_id: str, suggestion_id: str,
                     status: SuggestionStatus, actor: str) -> dict[str, Any] | None:
    """Record an operator's decision (who and when); the row as it is now."""
    await executor.execute(
        """UPDATE stt_suggestions SET status = $3, decided_at = now(), decided_by = $4
           WHERE id = $1 AND workspace_id = $2""",
        as_uuid(suggestion_id), as_uuid(workspace_id), status, actor)
    return await get_suggestion(executor, workspace_id, suggestion_id)
