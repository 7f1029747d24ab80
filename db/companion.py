"""A person's memories and reminders, for companion check-in calls.

Memories are what the person said on earlier calls, in their own words; reminders are
what the clinic asked the agent to bring up until the person confirms them. Reads and
writes are always scoped to one patient: an id that is not theirs is `NotFound`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from db.scheduling import NotFound

MEMORY_MAX_CHARS = 1000
_WORD = re.compile(r"[a-z0-9]{3,}")


@dataclass(frozen=True)
class Memory:
    id: str
    text: str
    created_at: datetime


@dataclass(frozen=True)
class Reminder:
    id: str
    text: str


def _memory(row: asyncpg.Record) -> Memory:
    return Memory(str(row["id"]), row["text"], row["created_at"])


async def recent_memories(pool: asyncpg.Pool, patient_id: str, limit: int = 5) -> list[Memory]:
    """The person's latest memories, newest first."""
    rows = await pool.fetch(
        """SELECT id, text, created_at FROM memories WHERE patient_id = $1
           ORDER BY created_at DESC LIMIT $2""",
        uuid.UUID(patient_id), limit,
    )
    return [_memory(r) for r in rows]


async def search_memories(
    pool: asyncpg.Pool, patient_id: str, query: str, limit: int = 3
) -> list[Memory]:
    """Memories sharing any word with `query` (English stemming), best match first."""
    words = _WORD.findall(query.lower())
    if not words:
        return []
    rows = await pool.fetch(
        """SELECT id, text, created_at FROM memories,
                  to_tsquery('english', $2) AS query
           WHERE patient_id = $1 AND to_tsvector('english', text) @@ query
           ORDER BY ts_rank(to_tsvector('english', text), query) DESC, created_at DESC
           LIMIT $3""",
        uuid.UUID(patient_id), " | ".join(words), limit,
    )
    return [_memory(r) for r in rows]


async def save_memory(pool: asyncpg.Pool, patient_id: str, text: str, call_id: str) -> Memory:
    row = await pool.fetchrow(
        """INSERT INTO memories (patient_id, text, source_call) VALUES ($1, $2, $3)
           RETURNING id, text, created_at""",
        uuid.UUID(patient_id), text.strip()[:MEMORY_MAX_CHARS], uuid.UUID(call_id),
    )
    return _memory(row)


async def open_reminders(pool: asyncpg.Pool, patient_id: str) -> list[Reminder]:
    rows = await pool.fetch(
        """SELECT id, text FROM reminders WHERE patient_id = $1 AND acknowledged_at IS NULL
           ORDER BY created_at""",
        uuid.UUID(patient_id),
    )
    return [Reminder(str(r["id"]), r["text"]) for r in rows]


async def acknowledge_reminder(
    pool: asyncpg.Pool, reminder_id: str, *, patient_id: str, call_id: str
) -> Reminder:
    """Mark the person's open reminder done (NotFound: not theirs, or already done)."""
    try:
        key = uuid.UUID(reminder_id)
    except ValueError:
        raise NotFound(reminder_id) from None
    row = await pool.fetchrow(
        """UPDATE reminders SET acknowledged_at = now(), acknowledged_by_call = $3
           WHERE id = $1 AND patient_id = $2 AND acknowledged_at IS NULL
           RETURNING id, text""",
        key, uuid.UUID(patient_id), uuid.UUID(call_id),
    )
    if row is None:
        raise NotFound(reminder_id)
    return Reminder(str(row["id"]), row["text"])
