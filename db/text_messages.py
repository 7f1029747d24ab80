"""The texts a clinic sends, and the numbers that asked for none.

A text is written `unsent` before Twilio is asked (`begin`), so a text whose answer was
lost is still on record; Twilio's answer gives it its SID and first status (`accepted`)
or says why not (`refused`, with Twilio's code). Status callbacks then move it on
(`on_status`); they can arrive out of order, so a status never moves a text back (a late
`sent` after `delivered` changes nothing).

A number that texted STOP to any of the workspace's clinic numbers gets no text from it
(`may_text`) until it texts START.

A reminder names its appointment, and an appointment gets one reminder text: beginning
a second one is `AlreadySent` once Twilio took the first. One Twilio refused, or whose
answer was lost, is tried again on the same record (a reminder that may arrive twice
is better than one that never comes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from db.repositories import as_uuid

KINDS = ("confirmation", "reminder", "telehealth_link", "payment_link")
# How far along each status is; a callback never moves a text to a lower one.
PROGRESS = {"unsent": 0, "accepted": 1, "scheduled": 1, "queued": 2, "sending": 3,
            "sent": 4, "delivered": 5, "read": 6, "undelivered": 5, "failed": 5,
            "canceled": 5, "refused": 5}
FAILED = frozenset({"undelivered", "failed", "canceled", "refused"})


class AlreadySent(Exception):
    """This appointment's reminder text went to Twilio already."""


@dataclass(frozen=True)
class TextMessage:
    id: str
    workspace_id: str
    call_id: str | None
    patient_id: str | None
    appointment_id: str | None
    kind: str
    to_number: str
    from_number: str | None
    body: str
    sid: str | None
    status: str
    error_code: int | None
    created_at: datetime
    updated_at: datetime

    @property
    def failed(self) -> bool:
        return self.status in FAILED


def _text(row: asyncpg.Record) -> TextMessage:
    values = dict(row)
    for name in ("id", "workspace_id", "call_id", "patient_id", "appointment_id"):
        values[name] = str(values[name]) if values[name] is not None else None
    return TextMessage(**values)


async def begin(pool: asyncpg.Pool | asyncpg.Connection, *, workspace_id: str, kind: str,
                to: str, from_: str | None, body: str, call_id: str | None = None,
                patient_id: str | None = None, appointment_id: str | None = None) -> str:
    """Write the text before Twilio is asked; its id. Raises `AlreadySent` for a reminder
    whose appointment has one Twilio took."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of text {kind!r}")
    text_id = await pool.fetchval(
        """INSERT INTO text_messages (workspace_id, call_id, patient_id, appointment_id, kind,
                                      to_number, from_number, body)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (appointment_id) WHERE kind = 'reminder' AND appointment_id IS NOT NULL
           DO UPDATE SET to_number = EXCLUDED.to_number, from_number = EXCLUDED.from_number,
                         body = EXCLUDED.body, status = 'unsent', error_code = NULL,
                         updated_at = now()
              WHERE text_messages.status IN ('unsent', 'refused')
           RETURNING id""",
        as_uuid(workspace_id), as_uuid(call_id), as_uuid(patient_id), as_uuid(appointment_id),
        kind, to, from_, body)
    if text_id is None:
        raise AlreadySent(f"appointment {appointment_id} has its reminder text")
    return str(text_id)


async def accepted(pool: asyncpg.Pool, text_id: str, *, sid: str, status: str) -> None:
    """Twilio took it: its SID, and its first status unless a callback came first."""
    await pool.execute(
        """UPDATE text_messages SET sid = $2, updated_at = now(),
               status = CASE WHEN status = 'unsent' THEN $3 ELSE status END
           WHERE id = $1""", as_uuid(text_id), sid, _known(status))


async def refused(pool: asyncpg.Pool, text_id: str, *, code: int | None) -> None:
    """Twilio would not take it (or could not be asked): `code` says why, when known."""
    await pool.execute(
        "UPDATE text_messages SET status = 'refused', error_code = $2, updated_at = now() "
        "WHERE id = $1 AND status = 'unsent'", as_uuid(text_id), code)


async def on_status(pool: asyncpg.Pool, sid: str, status: str,
                    error_code: int | None = None) -> TextMessage | None:
    """A status callback: the text moved on (never back); None when no text has `sid`."""
    status = _known(status)
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT * FROM text_messages WHERE sid = $1 FOR UPDATE", sid)
        if row is None or PROGRESS[status] <= PROGRESS[row["status"]]:
            return _text(row) if row is not None else None
        row = await conn.fetchrow(
            """UPDATE text_messages SET status = $2, error_code = COALESCE($3, error_code),
                   updated_at = now()
               WHERE id = $1 RETURNING *""", row["id"], status, error_code)
    return _text(row)


async def for_call(pool: asyncpg.Pool, call_id: str) -> list[TextMessage]:
    rows = await pool.fetch("SELECT * FROM text_messages WHERE call_id = $1 ORDER BY created_at",
                            as_uuid(call_id))
    return [_text(r) for r in rows]


async def sent_on_call(pool: asyncpg.Pool, call_id: str, kind: str) -> bool:
    """Whether a text of `kind` from this call went to Twilio (and was not refused)."""
    return await pool.fetchval(
        """SELECT EXISTS (SELECT 1 FROM text_messages WHERE call_id = $1 AND kind = $2
                  AND status NOT IN ('unsent', 'refused', 'failed', 'undelivered'))""",
        as_uuid(call_id), kind)


async def opt_out(pool: asyncpg.Pool, workspace_id: str, phone: str) -> None:
    await pool.execute(
        "INSERT INTO text_opt_outs (workspace_id, phone) VALUES ($1, $2) "
        "ON CONFLICT DO NOTHING", as_uuid(workspace_id), phone)


async def opt_in(pool: asyncpg.Pool, workspace_id: str, phone: str) -> None:
    await pool.execute("DELETE FROM text_opt_outs WHERE workspace_id = $1 AND phone = $2",
                       as_uuid(workspace_id), phone)


async def may_text(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                   phone: str) -> bool:
    return not await pool.fetchval(
        "SELECT EXISTS (SELECT 1 FROM text_opt_outs WHERE workspace_id = $1 AND phone = $2)",
        as_uuid(workspace_id), phone)


def _known(status: str) -> str:
    if status not in PROGRESS or status in ("unsent", "refused"):
        raise ValueError(f"not a Twilio message status: {status!r}")
    return status


__all__ = ["KINDS", "AlreadySent", "TextMessage", "accepted", "begin", "for_call", "may_text",
           "on_status", "opt_in", "opt_out", "refused"]
