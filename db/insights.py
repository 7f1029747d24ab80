"""Aggregates of a workspace's last N calls for the state guide (flows/state_guide.py).

Each child table is read once, grouped in SQL, for the same window of calls: the
window is the newest N calls of the workspace (optionally of one service), picked by the
`calls_workspace_started` index. A call's initial state is never a `next_state` (the
first transition leaves it), so the first transition's `previous_state` counts as an
entry too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from db.repositories import as_uuid

# --- What the database aggregates ----------------------------------------------------


@dataclass(frozen=True)
class StateCount:
    """Entries into one state: how often, in how many calls, when last."""

    state: str
    times: int
    calls: int
    last_seen: datetime | None = None


@dataclass(frozen=True)
class TriggerCount:
    """One exit taken: from `state` by `reason` (the exit's name) to `to`."""

    state: str | None
    reason: str | None
    to: str
    count: int
    last_seen: datetime | None = None


@dataclass(frozen=True)
class ToolCount:
    """One tool's calls by outcome; `error_classes` maps error class → count."""

    name: str
    calls: int
    error_classes: dict[str, int] = field(default_factory=dict)
    last_seen: datetime | None = None


@dataclass(frozen=True)
class ValueCount:
    value: str | None
    count: int


@dataclass(frozen=True)
class CallAggregates:
    """Everything the guide needs from the last N calls."""

    calls: int
    first_started_at: datetime | None = None
    last_started_at: datetime | None = None
    states: list[StateCount] = field(default_factory=list)
    triggers: list[TriggerCount] = field(default_factory=list)
    tools: list[ToolCount] = field(default_factory=list)
    completion_reasons: list[ValueCount] = field(default_factory=list)
    final_states: list[ValueCount] = field(default_factory=list)


_WINDOW = """
    WITH window_calls AS (
        SELECT id, started_at, completion_reason, final_state FROM calls
        WHERE workspace_id = $1 AND ($2::uuid IS NULL OR service_id = $2)
        ORDER BY started_at DESC, id DESC LIMIT $3
    )
"""

_CALLS = _WINDOW + """
    SELECT GROUPING(completion_reason) = 0 AS by_reason,
           GROUPING(final_state) = 0 AS by_state,
           completion_reason, final_state, count(*) AS n,
           min(started_at) AS first_started, max(started_at) AS last_started
    FROM window_calls
    GROUP BY GROUPING SETS ((), (completion_reason), (final_state))
"""

_TRANSITIONS = _WINDOW + """
    SELECT GROUPING(t.previous_state) = 0 AS is_trigger,
           entered.state, t.previous_state, t.reason, t.next_state,
           count(*) AS n, count(*) FILTER (WHERE entered.own) AS hops,
           count(DISTINCT t.call_id) AS calls, max(t.created_at) AS last_seen
    FROM state_transitions t
    JOIN window_calls w ON w.id = t.call_id
    CROSS JOIN LATERAL (VALUES (t.next_state, true),
                               (CASE WHEN t.seq = 1 THEN t.previous_state END, false))
        AS entered(state, own)
    WHERE entered.state IS NOT NULL
    GROUP BY GROUPING SETS ((entered.state), (t.previous_state, t.reason, t.next_state))
"""

_TOOLS = _WINDOW + """
    SELECT t.name, coalesce(t.error_class, '') AS error_class, count(*) AS n,
           max(t.created_at) AS last_seen
    FROM tool_calls t
    JOIN window_calls w ON w.id = t.call_id
    GROUP BY t.name, coalesce(t.error_class, '')
"""


async def call_aggregates(
    pool: asyncpg.Pool, workspace_id: str, service_id: str | None, last: int
) -> CallAggregates:
    """Grouped counts over the workspace's newest `last` calls (of one service when given)."""
    args = (as_uuid(workspace_id), as_uuid(service_id), last)
    # One snapshot: a call written between the three reads must not shift the window.
    async with pool.acquire() as conn, conn.transaction(readonly=True, isolation="repeatable_read"):
        call_rows = await conn.fetch(_CALLS, *args)
        transition_rows = await conn.fetch(_TRANSITIONS, *args)
        tool_rows = await conn.fetch(_TOOLS, *args)

    total = next((r for r in call_rows if not r["by_reason"] and not r["by_state"]), None)
    reasons = [ValueCount(r["completion_reason"], r["n"]) for r in call_rows if r["by_reason"]]
    finals = [ValueCount(r["final_state"], r["n"]) for r in call_rows if r["by_state"]]

    # A first hop is two rows of the lateral join (both its states are entries); a
    # trigger counts only the hop's own row (`hops`).
    states = [StateCount(r["state"], r["n"], r["calls"], r["last_seen"])
              for r in transition_rows if not r["is_trigger"]]
    triggers = [TriggerCount(r["previous_state"], r["reason"], r["next_state"], r["hops"],
                             r["last_seen"])
                for r in transition_rows if r["is_trigger"]]

    tools: dict[str, dict] = {}
    for row in tool_rows:
        entry = tools.setdefault(row["name"], {"calls": 0, "classes": {}, "last": None})
        entry["calls"] += row["n"]
        if row["error_class"]:
            entry["classes"][row["error_class"]] = row["n"]
        if entry["last"] is None or row["last_seen"] > entry["last"]:
            entry["last"] = row["last_seen"]

    return CallAggregates(
        calls=total["n"] if total else 0,
        first_started_at=total["first_started"] if total else None,
        last_started_at=total["last_started"] if total else None,
        states=states,
        triggers=triggers,
        tools=[ToolCount(name, e["calls"], e["classes"], e["last"]) for name, e in tools.items()],
        completion_reasons=reasons,
        final_states=finals,
    )
