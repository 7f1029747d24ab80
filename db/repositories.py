"""Queries, as plain async functions over the pool. Values come back JSON-ready.

Ids are strings, timestamps ISO-8601 strings; an id that is not a UUID simply
matches nothing (ids arrive from URLs and WebSocket parameters).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime
from typing import Any

import asyncpg

JsonDict = dict[str, Any]

KEY_PREFIX = "vk"
# Columns a caller may change on a call record (anything else is a programming error).
CALL_UPDATE_COLUMNS = frozenset({
    "status", "twilio_status", "twilio_duration_s", "connected_at", "ended_at", "duration_s",
    "completion_reason", "final_state", "config_snapshot", "recording_path",
})


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _row(record: asyncpg.Record | None) -> JsonDict | None:
    return None if record is None else {key: _plain(value) for key, value in record.items()}


def _rows(records: list[asyncpg.Record]) -> list[JsonDict]:
    return [_row(record) for record in records]


def as_uuid(value: str | uuid.UUID | None) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError):
        return None


def hash_api_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


# --- Workspaces ------------------------------------------------------------------


async def create_workspace(pool: asyncpg.Pool, name: str) -> JsonDict:
    return _row(await pool.fetchrow(
        "INSERT INTO workspaces (name) VALUES ($1) RETURNING *", name
    ))


async def get_workspace_by_name(pool: asyncpg.Pool, name: str) -> JsonDict | None:
    return _row(await pool.fetchrow("SELECT * FROM workspaces WHERE name = $1", name))


async def ensure_workspace(pool: asyncpg.Pool, name: str) -> JsonDict:
    return _row(await pool.fetchrow(
        """INSERT INTO workspaces (name) VALUES ($1)
           ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING *""",
        name,
    ))


# --- API keys --------------------------------------------------------------------


async def create_api_key(pool: asyncpg.Pool, workspace_id: str, name: str = "") -> str:
    """Create a key and return its plaintext, which is never stored."""
    prefix = secrets.token_hex(4)
    plaintext = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    await pool.execute(
        "INSERT INTO api_keys (workspace_id, name, prefix, key_hash) VALUES ($1, $2, $3, $4)",
        as_uuid(workspace_id), name, prefix, hash_api_key(plaintext),
    )
    return plaintext


async def verify_api_key(pool: asyncpg.Pool, plaintext: str) -> str | None:
    """The workspace id of a valid, unrevoked key, else None."""
    workspace_id = await pool.fetchval(
        """UPDATE api_keys SET last_used_at = now()
           WHERE key_hash = $1 AND revoked_at IS NULL RETURNING workspace_id""",
        hash_api_key(plaintext),
    )
    return _plain(workspace_id)


async def revoke_api_key(pool: asyncpg.Pool, plaintext: str) -> bool:
    status = await pool.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL",
        hash_api_key(plaintext),
    )
    return status.endswith(" 1")


# --- Voice settings --------------------------------------------------------------


async def get_voice_settings_raw(pool: asyncpg.Pool, workspace_id: str | None) -> Any:
    if as_uuid(workspace_id) is None:
        return None
    return await pool.fetchval(
        "SELECT settings FROM voice_settings WHERE workspace_id = $1", as_uuid(workspace_id)
    )


async def set_voice_settings(pool: asyncpg.Pool, workspace_id: str, settings: Any) -> None:
    await pool.execute(
        """INSERT INTO voice_settings (workspace_id, settings) VALUES ($1, $2)
           ON CONFLICT (workspace_id) DO UPDATE SET settings = $2, updated_at = now()""",
        as_uuid(workspace_id), settings,
    )


# --- Services --------------------------------------------------------------------


async def create_service(
    pool: asyncpg.Pool, workspace_id: str, name: str, *, phone_number: str | None = None,
    keyterms: list[str] | None = None, greeting: str | None = None,
) -> JsonDict:
    return _row(await pool.fetchrow(
        """INSERT INTO services (workspace_id, name, phone_number, keyterms, greeting)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (workspace_id, name) DO UPDATE SET
             phone_number = EXCLUDED.phone_number, keyterms = EXCLUDED.keyterms,
             greeting = EXCLUDED.greeting
           RETURNING *""",
        as_uuid(workspace_id), name, phone_number, keyterms or [], greeting,
    ))


async def find_service_by_phone(pool: asyncpg.Pool, phone_number: str) -> JsonDict | None:
    return _row(await pool.fetchrow("SELECT * FROM services WHERE phone_number = $1", phone_number))


async def default_service(pool: asyncpg.Pool, workspace_id: str | None) -> JsonDict | None:
    """The oldest service (of a workspace, or overall): where unknown numbers land."""
    if workspace_id is None:
        return _row(await pool.fetchrow("SELECT * FROM services ORDER BY created_at LIMIT 1"))
    return _row(await pool.fetchrow(
        "SELECT * FROM services WHERE workspace_id = $1 ORDER BY created_at LIMIT 1",
        as_uuid(workspace_id),
    ))


# --- Calls -----------------------------------------------------------------------


async def create_call(
    pool: asyncpg.Pool, *, workspace_id: str | None, service_id: str | None,
    call_sid: str | None, direction: str, from_number: str | None, to_number: str | None,
    status: str, config_snapshot: JsonDict | None = None,
) -> str:
    call_id = await pool.fetchval(
        """INSERT INTO calls (workspace_id, service_id, call_sid, direction, from_number,
                              to_number, status, config_snapshot)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id""",
        as_uuid(workspace_id), as_uuid(service_id), call_sid, direction, from_number,
        to_number, status, config_snapshot or {},
    )
    return str(call_id)


async def get_call(pool: asyncpg.Pool, call_id: str) -> JsonDict | None:
    if as_uuid(call_id) is None:
        return None
    return _row(await pool.fetchrow("SELECT * FROM calls WHERE id = $1", as_uuid(call_id)))


async def find_call_by_sid(pool: asyncpg.Pool, call_sid: str | None) -> JsonDict | None:
    if not call_sid:
        return None
    return _row(await pool.fetchrow("SELECT * FROM calls WHERE call_sid = $1", call_sid))


def call_update_sql(fields: dict[str, Any]) -> tuple[str, list[Any]]:
    """`SET a = $2, b = $3` for an allow-listed set of columns ($1 is the call id)."""
    unknown = set(fields) - CALL_UPDATE_COLUMNS
    if unknown:
        raise ValueError(f"not updatable call columns: {sorted(unknown)}")
    names = sorted(fields)
    assignments = ", ".join(f"{name} = ${index}" for index, name in enumerate(names, start=2))
    return f"UPDATE calls SET {assignments} WHERE id = $1", [fields[name] for name in names]


async def update_call(pool: asyncpg.Pool, call_id: str, **fields: Any) -> None:
    if not fields:
        return
    sql, values = call_update_sql(fields)
    await pool.execute(sql, as_uuid(call_id), *values)


async def list_calls(
    pool: asyncpg.Pool, workspace_id: str, *, limit: int = 50, before: datetime | None = None
) -> list[JsonDict]:
    """Newest first; `before` pages back through history."""
    return _rows(await pool.fetch(
        """SELECT id, call_sid, direction, status, started_at, connected_at, ended_at,
                  duration_s, completion_reason, final_state, recording_path,
                  (SELECT count(*) FROM turns t WHERE t.call_id = calls.id) AS turn_count
           FROM calls
           WHERE workspace_id = $1 AND ($2::timestamptz IS NULL OR started_at < $2)
           ORDER BY started_at DESC LIMIT $3""",
        as_uuid(workspace_id), before, limit,
    ))


async def get_call_detail(pool: asyncpg.Pool, call_id: str, workspace_id: str) -> JsonDict | None:
    """The full record of one of the workspace's calls: turns, transitions, tools, events."""
    call_uuid = as_uuid(call_id)
    if call_uuid is None:
        return None
    async with pool.acquire() as conn:
        call = _row(await conn.fetchrow(
            "SELECT * FROM calls WHERE id = $1 AND workspace_id = $2", call_uuid,
            as_uuid(workspace_id),
        ))
        if call is None:
            return None
        drop = ("id", "call_id", "created_at")

        async def children(table: str, order: str) -> list[JsonDict]:
            rows = _rows(await conn.fetch(
                f"SELECT * FROM {table} WHERE call_id = $1 ORDER BY {order}", call_uuid
            ))
            return [{k: v for k, v in row.items() if k not in drop} for row in rows]

        call["turns"] = await children("turns", "seq")
        call["transitions"] = await children("state_transitions", "seq")
        call["tool_calls"] = await children("tool_calls", "started_ms NULLS LAST, id")
        call["events"] = await children("call_events", "seq")
    return call
