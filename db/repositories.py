"""Queries, as plain async functions over the pool. Values come back JSON-ready.

Ids are strings and timestamps ISO-8601 strings, so API handlers can return rows
as they are. An id that is not a UUID simply matches nothing: ids arrive from URLs
and WebSocket parameters, and a malformed one is "not found", not a server error.
The pool must come from `Database.connect`: its connections carry the json codecs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

JsonDict = dict[str, Any]

KEY_PREFIX = "vk"
_KEY_SHAPE = re.compile(r"^vk_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}$")
MAX_LIST_LIMIT = 200

# Columns a caller may change on a call record; anything else is a programming error.
CALL_UPDATE_COLUMNS = frozenset({
    "status", "twilio_status", "twilio_duration_s", "connected_at", "ended_at", "duration_s",
    "completion_reason", "final_state", "config_snapshot", "recording_path",
    "emotional_summary", "patient_id",
})
# Twilio's own reports (the status callback), the only writer of these columns: they are
# not part of the call's lifecycle order, so writing them never makes a lifecycle update
# still in the writer's queue look older than the row (the call would stay in_progress).
UNORDERED_CALL_COLUMNS = frozenset({"twilio_status", "twilio_duration_s"})
# Child rows in a call detail: table, key, order. Their own id/call_id are noise there.
_CALL_CHILDREN = (
    ("turns", "turns", "seq"),
    ("escalations", "escalations", "seq"),
    ("transitions", "state_transitions", "seq"),
    ("tool_calls", "tool_calls", "started_ms NULLS LAST, id"),
    ("events", "call_events", "seq"),
)
_CHILD_HIDDEN = frozenset({"id", "call_id", "created_at"})


# --- Conversions ---------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A database value as JSON-ready Python."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _row(record: Mapping[str, Any]) -> JsonDict:
    return {key: _plain(value) for key, value in record.items()}


def _row_or_none(record: Mapping[str, Any] | None) -> JsonDict | None:
    return None if record is None else _row(record)


def _rows(records: Iterable[Mapping[str, Any]]) -> list[JsonDict]:
    return [_row(record) for record in records]


def as_uuid(value: str | uuid.UUID | None) -> uuid.UUID | None:
    """The UUID an id names, or None when it is not one."""
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def hash_api_key(plaintext: str) -> str:
    """Keys are stored only as SHA-256 hex: a database leak does not leak keys."""
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


# --- Workspaces ----------------------------------------------------------------


async def create_workspace(pool: asyncpg.Pool | asyncpg.Connection, name: str, *,
                           created_by: str | None = None) -> JsonDict:
    """A new workspace (`created_by`: the workspace whose admin created it; None from the
    command line); raises `asyncpg.UniqueViolationError` when the name is taken."""
    return _row(await pool.fetchrow(
        "INSERT INTO workspaces (name, created_by) VALUES ($1, $2) RETURNING *",
        name, as_uuid(created_by)))


async def get_workspace_by_name(pool: asyncpg.Pool, name: str) -> JsonDict | None:
    return _row_or_none(await pool.fetchrow("SELECT * FROM workspaces WHERE name = $1", name))


async def ensure_workspace(pool: asyncpg.Pool, name: str) -> JsonDict:
    """The workspace with this name, created if missing (safe under concurrency)."""
    return _row(await pool.fetchrow(
        """INSERT INTO workspaces (name) VALUES ($1)
           ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING *""",
        name,
    ))


# --- API keys ------------------------------------------------------------------


API_KEY_ROLES = ("admin", "operator", "read_only")


async def create_api_key(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                         name: str = "", *, role: str = "admin") -> str:
    """Create a key with `role` (one of `API_KEY_ROLES`) and return its plaintext
    `vk_<prefix8>_<secret>`, which is never stored."""
    prefix = secrets.token_hex(4)
    plaintext = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    await pool.execute(
        "INSERT INTO api_keys (workspace_id, name, prefix, key_hash, role) "
        "VALUES ($1, $2, $3, $4, $5)",
        as_uuid(workspace_id), name, prefix, hash_api_key(plaintext), str(role),
    )
    return plaintext


async def verify_api_key(pool: asyncpg.Pool, plaintext: str) -> str | None:
    """The workspace id of a valid, unrevoked key (and mark it used), else None."""
    if not _KEY_SHAPE.match(plaintext):
        return None
    workspace_id = await pool.fetchval(
        """UPDATE api_keys SET last_used_at = now()
           WHERE key_hash = $1 AND revoked_at IS NULL RETURNING workspace_id""",
        hash_api_key(plaintext),
    )
    return _plain(workspace_id)


async def revoke_api_key(pool: asyncpg.Pool, plaintext: str) -> bool:
    """Revoke a key; False when it is unknown or already revoked."""
    revoked = await pool.fetchval(
        """UPDATE api_keys SET revoked_at = now()
           WHERE key_hash = $1 AND revoked_at IS NULL RETURNING id""",
        hash_api_key(plaintext),
    )
    return revoked is not None


# Key rows as listed: never the hash.
_KEY_COLUMNS = "id, workspace_id, name, prefix, role, created_at, last_used_at, revoked_at"


async def authenticate_api_key(pool: asyncpg.Pool, plaintext: str) -> JsonDict | None:
    """{id, workspace_id, prefix, role, key_hash} of a valid, unrevoked key, without
    marking it used (the caller decides how often that write is worth it: see
    `touch_api_key`)."""
    if not _KEY_SHAPE.match(plaintext):
        return None
    return _row_or_none(await pool.fetchrow(
        "SELECT id, workspace_id, prefix, role, key_hash FROM api_keys "
        "WHERE key_hash = $1 AND revoked_at IS NULL",
        hash_api_key(plaintext),
    ))


async def touch_api_key(pool: asyncpg.Pool, key_id: str) -> None:
    """Record that a key was used now."""
    await pool.execute("UPDATE api_keys SET last_used_at = now() WHERE id = $1", as_uuid(key_id))


async def list_api_keys(pool: asyncpg.Pool, workspace_id: str) -> list[JsonDict]:
    """The workspace's keys (revoked ones too), newest first."""
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return []
    return _rows(await pool.fetch(
        f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE workspace_id = $1 "
        "ORDER BY created_at DESC, id DESC", workspace,
    ))


async def get_api_key(pool: asyncpg.Pool | asyncpg.Connection,
                      plaintext: str) -> JsonDict | None:
    """The stored row of a key (as listed), e.g. right after creating it."""
    return _row_or_none(await pool.fetchrow(
        f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1", hash_api_key(plaintext)
    ))


async def revoke_api_key_by_id(
    pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str, key: str
) -> JsonDict | None:
    """Revoke one of the workspace's keys, named by id or by its 8-character prefix.

    Returns {id, name, prefix, role, key_hash} of the key revoked now (so caches can drop
    it), None when the workspace has no such unrevoked key.
    """
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return None
    key_uuid = as_uuid(key)
    return _row_or_none(await pool.fetchrow(
        """UPDATE api_keys SET revoked_at = now()
           WHERE workspace_id = $1 AND revoked_at IS NULL
             AND (id = $2 OR ($2::uuid IS NULL AND prefix = $3))
           RETURNING id, name, prefix, role, key_hash""",
        workspace, key_uuid, key,
    ))


# --- Voice settings ------------------------------------------------------------


async def get_voice_settings_raw(pool: asyncpg.Pool | asyncpg.Connection,
                                 workspace_id: str | None) -> Any | None:
    """The workspace's settings JSON as stored (None when unset); parsing is elsewhere."""
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return None
    return await pool.fetchval(
        "SELECT settings FROM voice_settings WHERE workspace_id = $1", workspace
    )


async def set_voice_settings(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                             settings: Any) -> None:
    """Replace the workspace's settings JSON."""
    await pool.execute(
        """INSERT INTO voice_settings (workspace_id, settings) VALUES ($1, $2)
           ON CONFLICT (workspace_id)
           DO UPDATE SET settings = EXCLUDED.settings, updated_at = now()""",
        as_uuid(workspace_id), settings,
    )


# --- Services ------------------------------------------------------------------


# Every service column, and its numbers (oldest first) as `phone_numbers`.
SERVICE_COLUMNS = """s.id, s.workspace_id, s.name, s.keyterms, s.greeting, s.graph_id, s.created_at,
       ARRAY(SELECT n.phone_number FROM service_numbers n WHERE n.service_id = s.id
             ORDER BY n.created_at, n.phone_number) AS phone_numbers"""


async def create_service(
    pool: asyncpg.Pool,
    workspace_id: str,
    name: str,
    *,
    phone_number: str | None = None,
    keyterms: list[str] | None = None,
    greeting: str | None = None,
) -> JsonDict:
    """Create the workspace's service `name`, or update it in place (so seeding can re-run);
    `phone_number`, when given, is added to the numbers that reach it."""
    async with pool.acquire() as connection, connection.transaction():
        service_id = await connection.fetchval(
            """INSERT INTO services (workspace_id, name, keyterms, greeting)
               VALUES ($1, $2, $3, $4)
               ON CONFLICT (workspace_id, name) DO UPDATE SET
                 keyterms = EXCLUDED.keyterms, greeting = EXCLUDED.greeting
               RETURNING id""",
            as_uuid(workspace_id), name, keyterms or [], greeting,
        )
        if phone_number:
            await connection.execute(
                """INSERT INTO service_numbers (phone_number, service_id) VALUES ($1, $2)
                   ON CONFLICT (phone_number) DO UPDATE SET service_id = EXCLUDED.service_id""",
                phone_number, service_id)
        return _row(await connection.fetchrow(
            f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.id = $1", service_id))


async def set_service_graph(pool: asyncpg.Pool, service_id: str, graph_id: str | None) -> None:
    """Which context graph the service's calls run (None: the configured default)."""
    await pool.execute(
        "UPDATE services SET graph_id = $2 WHERE id = $1", as_uuid(service_id), graph_id
    )


async def get_service_by_name(
    pool: asyncpg.Pool, workspace_id: str, name: str
) -> JsonDict | None:
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return None
    return _row_or_none(await pool.fetchrow(
        f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.workspace_id = $1 AND s.name = $2",
        workspace, name,
    ))


async def find_service_by_phone(pool: asyncpg.Pool, phone_number: str) -> JsonDict | None:
    """The service an inbound call to `phone_number` reaches: the one that owns the
    number, else the service of the (live) location with that number."""
    return _row_or_none(await pool.fetchrow(
        f"""SELECT {SERVICE_COLUMNS} FROM services s
             WHERE s.id = (SELECT service_id FROM service_numbers WHERE phone_number = $1)
           UNION ALL
           SELECT {SERVICE_COLUMNS} FROM services s JOIN locations l ON l.service_id = s.id
            WHERE l.phone_number = $1 AND l.retired_at IS NULL
           LIMIT 1""", phone_number))


async def default_service(pool: asyncpg.Pool, workspace_id: str) -> JsonDict | None:
    """The workspace's oldest service. Never "of any workspace": which clinic a call
    reaches is db/service_numbers.dialled_clinic's decision."""
    return _row_or_none(await pool.fetchrow(
        f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.workspace_id = $1 "
        "ORDER BY s.created_at, s.id LIMIT 1",
        as_uuid(workspace_id),
    ))


# --- Calls ---------------------------------------------------------------------


async def create_call(
    pool: asyncpg.Pool,
    *,
    workspace_id: str | None,
    service_id: str | None,
    call_sid: str | None,
    direction: str,
    from_number: str | None,
    to_number: str | None,
    status: str,
    config_snapshot: JsonDict | None = None,
    owner_instance: str | None = None,
    call_id: str | None = None,
    stream_setup: JsonDict | None = None,
) -> str:
    """Create the call row (before its pipeline starts, so child records can refer to it).
    `owner_instance`: the service process answering it (db/instances). `call_id`: an id
    chosen beforehand (new when None), so an insert that timed out can still be named.
    `stream_setup`: what the process that claims the call's media stream needs to run it
    (`claim_call_for_stream` hands it over), in the same statement."""
    created = await pool.fetchval(
        """WITH call AS (
               INSERT INTO calls (id, workspace_id, service_id, call_sid, direction,
                                  from_number, to_number, status, config_snapshot,
                                  owner_instance)
               VALUES (COALESCE($10, gen_random_uuid()), $1, $2, $3, $4, $5, $6, $7, $8, $9)
               RETURNING id),
           setup AS (
               INSERT INTO call_stream_setups (call_id, setup)
               SELECT id, $11::jsonb FROM call WHERE $11::jsonb IS NOT NULL)
           SELECT id FROM call""",
        as_uuid(workspace_id), as_uuid(service_id), call_sid, direction, from_number,
        to_number, status, config_snapshot or {}, owner_instance, as_uuid(call_id),
        stream_setup,
    )
    return str(created)


async def get_call(pool: asyncpg.Pool, call_id: str) -> JsonDict | None:
    call = as_uuid(call_id)
    if call is None:
        return None
    return _row_or_none(await pool.fetchrow("SELECT * FROM calls WHERE id = $1", call))


async def last_event_seq(pool: asyncpg.Pool, call_id: str) -> int:
    """The highest event number on a call's record (0: none yet)."""
    return int(await pool.fetchval(
        "SELECT COALESCE(max(seq), 0) FROM call_events WHERE call_id = $1",
        as_uuid(call_id)) or 0)


async def last_record_seq(pool: asyncpg.Pool, call_id: str) -> int:
    """The highest number any record of the call has (events, turns, transitions, tool
    calls, escalations); 0 for none."""
    return int(await pool.fetchval(
        """SELECT greatest(
               (SELECT coalesce(max(seq), 0) FROM call_events WHERE call_id = $1),
               (SELECT coalesce(max(seq), 0) FROM turns WHERE call_id = $1),
               (SELECT coalesce(max(seq), 0) FROM state_transitions WHERE call_id = $1),
               (SELECT coalesce(max(seq), 0) FROM escalations WHERE call_id = $1),
               (SELECT count(*) FROM tool_calls WHERE call_id = $1))""",
        as_uuid(call_id)) or 0)


async def claim_call_for_stream(
    pool: asyncpg.Pool, call_id: str, owner_instance: str | None = None
) -> JsonDict | None:
    """Mark a ringing call connected, once: the one media stream allowed to carry it, on
    the service process `owner_instance` (kept as it was when None).

    Atomic, so two streams presenting the same call id cannot both be accepted.
    None when the call does not exist, already has a stream, or has ended. The row
    carries `stream_setup`, what the answer stored for the stream (None: nothing), taken
    from the database in the same statement.
    """
    call = as_uuid(call_id)
    if call is None:
        return None
    return _row_or_none(await pool.fetchrow(
        """WITH setup AS (DELETE FROM call_stream_setups WHERE call_id = $1 RETURNING setup)
           UPDATE calls SET connected_at = now(),
                            owner_instance = COALESCE($2, owner_instance)
           WHERE id = $1 AND connected_at IS NULL AND ended_at IS NULL
           RETURNING calls.*, (SELECT setup FROM setup) AS stream_setup""",
        call, owner_instance,
    ))


async def forget_stream_setups(pool: asyncpg.Pool, *, older_than_s: float) -> int:
    """Delete the set-ups of answered calls no stream claimed within `older_than_s`."""
    status = await pool.execute(
        "DELETE FROM call_stream_setups WHERE created_at < now() - make_interval(secs => $1)",
        older_than_s)
    return int(status.rsplit(" ", 1)[-1])


async def find_call_by_sid(pool: asyncpg.Pool, call_sid: str | None) -> JsonDict | None:
    """The call Twilio knows by `call_sid`."""
    if not call_sid:
        return None
    return _row_or_none(await pool.fetchrow("SELECT * FROM calls WHERE call_sid = $1", call_sid))


def call_update_sql(fields: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL for an update of allow-listed columns; $1 is the call id, $2 when it was made.

    An update older than the row's `updated_at` (a replayed one) only fills columns
    that are still NULL, so it can never roll the call back to an earlier state.
    """
    unknown = set(fields) - CALL_UPDATE_COLUMNS
    if unknown:
        raise ValueError(f"not updatable call columns: {sorted(unknown)}")
    if not fields:
        raise ValueError("a call update needs at least one column")
    names = sorted(fields)
    assignments = ", ".join(
        f"{name} = CASE WHEN updated_at > $2 THEN COALESCE({name}, ${index}) ELSE ${index} END"
        for index, name in enumerate(names, start=3)
    )
    stamp = "" if set(names) <= UNORDERED_CALL_COLUMNS else ", updated_at = GREATEST(updated_at, $2)"
    sql = f"UPDATE calls SET {assignments}{stamp} WHERE id = $1"
    return sql, [fields[name] for name in names]


async def update_call(pool: asyncpg.Pool, call_id: str, **fields: Any) -> bool:
    """Change allow-listed columns now; False when no such call exists."""
    if not fields:
        return False
    sql, values = call_update_sql(fields)
    call = as_uuid(call_id)
    if call is None:
        return False
    status = await pool.execute(sql, call, datetime.now(UTC), *values)
    return status == "UPDATE 1"


@dataclass(frozen=True)
class CallFilters:
    """What the calls history narrows to; None leaves a dimension open."""

    started_after: datetime | None = None
    started_before: datetime | None = None
    final_state: str | None = None
    status: str | None = None
    completion_reason: str | None = None
    escalated: bool | None = None
    # True/False: has (no) failed tool call; "guard" | "pms" | "conflict" | "timeout" |
    # "other": one of that class.
    tool_error: bool | str | None = None
    quality_below: float | None = None  # analysed calls scoring under this (1-5)


@dataclass(frozen=True)
class CallCursor:
    """Where a history page ended: the last call's (started_at, id), newest first; in the
    worst-first order, its quality score before them."""

    started_at: datetime
    call_id: uuid.UUID
    quality: float | None = None


class InvalidCursor(ValueError):
    """A cursor this server did not issue for this workspace (or one altered since)."""


def _cursor_tag(workspace_id: str, payload: str) -> str:
    return hashlib.sha256(f"{workspace_id}|{payload}".encode()).hexdigest()[:16]


def encode_cursor(workspace_id: str, cursor: CallCursor) -> str:
    """Opaque to clients; the tag ties it to the workspace and shows any edit."""
    payload = f"{cursor.started_at.isoformat()}|{cursor.call_id}"
    if cursor.quality is not None:
        payload += f"|{cursor.quality!r}"
    raw = f"{payload}|{_cursor_tag(workspace_id, payload)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(workspace_id: str, token: str) -> CallCursor:
    """The position a cursor names; `InvalidCursor` when it is malformed or was altered."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        payload, tag = raw.rsplit("|", 1)
        # As bytes: compare_digest refuses non-ASCII str (a TypeError, i.e. a 500).
        expected = _cursor_tag(workspace_id, payload)
        if not hmac.compare_digest(tag.encode(), expected.encode()):
            raise InvalidCursor("cursor was altered")
        started, call, *quality = payload.split("|")
        started_at = datetime.fromisoformat(started)
        if started_at.tzinfo is None or len(quality) > 1:
            raise InvalidCursor("malformed cursor")
        return CallCursor(started_at, uuid.UUID(call),
                          float(quality[0]) if quality else None)
    except InvalidCursor:
        raise
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors too
        raise InvalidCursor("malformed cursor") from None


def calls_history_sql(filters: CallFilters) -> tuple[str, list[Any]]:
    """The history query's WHERE clause and values from $2 on ($1 is the workspace).

    Each filter adds a clause only when set, so the planner sees the plain index scan on
    (workspace_id, started_at DESC, id DESC) whenever it can; the cursor is a row
    comparison that the same index answers without an offset.
    """
    clauses, values = ["c.workspace_id = $1"], []

    def bind(value: Any) -> str:
        values.append(value)
        return f"${len(values) + 1}"

    if filters.started_after is not None:
        clauses.append(f"c.started_at >= {bind(filters.started_after)}")
    if filters.started_before is not None:
        clauses.append(f"c.started_at < {bind(filters.started_before)}")
    for column in ("final_state", "status", "completion_reason"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"c.{column} = {bind(value)}")
    if filters.escalated is not None:
        exists = "EXISTS (SELECT 1 FROM escalations e WHERE e.call_id = c.id)"
        clauses.append(exists if filters.escalated else f"NOT {exists}")
    if filters.tool_error is not None:
        failed = "SELECT 1 FROM tool_calls t WHERE t.call_id = c.id AND t.error_class IS NOT NULL"
        if isinstance(filters.tool_error, str):
            clauses.append(f"EXISTS ({failed} AND t.error_class = {bind(filters.tool_error)})")
        else:
            clauses.append(f"{'' if filters.tool_error else 'NOT '}EXISTS ({failed})")
    if filters.quality_below is not None:
        clauses.append(f"a.quality_score < {bind(filters.quality_below)}")
    return " AND ".join(clauses), values


async def list_calls(
    pool: asyncpg.Pool,
    workspace_id: str,
    *,
    limit: int = 50,
    filters: CallFilters | None = None,
    cursor: CallCursor | None = None,
    worst_first: bool = False,
) -> list[JsonDict]:
    """The workspace's calls matching `filters`, newest first (or, `worst_first`, the
    analysed calls by quality score, lowest first), after `cursor` when given.

    Ordered by (started_at, id) so calls that started in the same microsecond still page
    in a fixed order, and a call inserted meanwhile never shifts a later page.
    """
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return []
    where, values = calls_history_sql(filters or CallFilters())
    order = "c.started_at DESC, c.id DESC"
    if worst_first:
        where += " AND a.quality_score IS NOT NULL"
        order = f"a.quality_score ASC, {order}"
    if cursor is not None:
        values += [cursor.started_at, cursor.call_id]
        after = f"(c.started_at, c.id) < (${len(values)}, ${len(values) + 1})"
        if worst_first:
            values.append(cursor.quality)
            score = f"${len(values) + 1}::real"
            after = f"(a.quality_score > {score} OR (a.quality_score = {score} AND {after}))"
        where += f" AND {after}"
    values.append(max(1, min(limit, MAX_LIST_LIMIT + 1)))  # a page and one to see if more follow
    return _rows(await pool.fetch(
        f"""SELECT c.id, c.service_id, c.call_sid, c.direction, c.status, c.started_at,
                   c.connected_at, c.ended_at, c.duration_s, c.completion_reason,
                   c.final_state, c.recording_path, c.transcript_accuracy,
                   a.quality_score,
                   (SELECT count(*) FROM turns t WHERE t.call_id = c.id) AS turn_count,
                   EXISTS (SELECT 1 FROM escalations e WHERE e.call_id = c.id) AS escalated,
                   (SELECT count(*) FROM tool_calls t
                     WHERE t.call_id = c.id AND t.error_class IS NOT NULL) AS tool_errors
            FROM calls c LEFT JOIN call_analyses a ON a.call_id = c.id
            WHERE {where}
            ORDER BY {order} LIMIT ${len(values) + 1}""",
        workspace, *values,
    ))


async def get_call_detail(pool: asyncpg.Pool, call_id: str, workspace_id: str) -> JsonDict | None:
    """One of the workspace's calls with its turns, transitions, tool calls and events.

    None for an unknown call and for another workspace's call alike, so a caller
    cannot probe which call ids exist.
    """
    call_uuid, workspace = as_uuid(call_id), as_uuid(workspace_id)
    if call_uuid is None or workspace is None:
        return None
    async with pool.acquire() as conn, conn.transaction(readonly=True, isolation="repeatable_read"):
        call = _row_or_none(await conn.fetchrow(
            "SELECT * FROM calls WHERE id = $1 AND workspace_id = $2", call_uuid, workspace
        ))
        if call is None:
            return None
        for key, table, order in _CALL_CHILDREN:
            rows = await conn.fetch(
                f"SELECT * FROM {table} WHERE call_id = $1 ORDER BY {order}", call_uuid
            )
            call[key] = [
                {name: value for name, value in _row(row).items() if name not in _CHILD_HIDDEN}
                for row in rows
            ]
    return call
