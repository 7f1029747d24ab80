"""Bring one kind of named entry (locations, practitioners or appointment types) in line
with the file, matched by name: changed fields updated, new ones added (a retired one of
that name comes back), missing ones retired when bookings name them, deleted when
nothing does, and refused while live bookings are still to come."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from db.clinic.bookings import uses_of
from db.clinic.kinds import Kind
from db.clinic.state import Stored


@dataclass
class Synced:
    ids: dict[str, uuid.UUID] = field(default_factory=dict)  # live entries by name, after
    changes: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # why an entry cannot go (a problem)


async def sync_entries(connection: asyncpg.Connection, service_id: uuid.UUID, kind: Kind,
                       wanted: list[Any], current: dict[str, Stored], now: datetime) -> Synced:
    synced = Synced()
    for entry in wanted:
        stored = current.get(entry.name)
        values = kind.values(entry)
        if stored is None:
            synced.ids[entry.name] = await _add(connection, service_id, kind, entry.name,
                                                values, synced)
            continue
        synced.ids[entry.name] = stored.id
        before = kind.values(stored.entry)
        changed = [column for column in kind.columns if values[column] != before[column]]
        if changed:
            await connection.execute(
                f"UPDATE {kind.table} SET "
                + ", ".join(f"{column} = ${n}" for n, column in enumerate(changed, 2))
                + " WHERE id = $1", stored.id, *(values[column] for column in changed))
            synced.changes.append(f"{kind.label} '{entry.name}' updated ({', '.join(changed)})")
    names = {entry.name for entry in wanted}
    for name, stored in sorted(current.items()):
        if name not in names:
            await _remove(connection, kind, name, stored.id, now, synced)
    return synced


async def _add(connection: asyncpg.Connection, service_id: uuid.UUID, kind: Kind, name: str,
               values: dict[str, Any], synced: Synced) -> uuid.UUID:
    retired = await connection.fetchval(
        f"""SELECT id FROM {kind.table} WHERE service_id = $1 AND name = $2
            AND retired_at IS NOT NULL ORDER BY retired_at DESC LIMIT 1""", service_id, name)
    columns = list(kind.columns)
    if retired is not None:
        await connection.execute(
            f"UPDATE {kind.table} SET retired_at = NULL, "
            + ", ".join(f"{column} = ${n}" for n, column in enumerate(columns, 2))
            + " WHERE id = $1", retired, *(values[column] for column in columns))
        synced.changes.append(f"{kind.label} '{name}' restored")
        return retired
    placeholders = ", ".join(f"${n}" for n in range(3, len(columns) + 3))
    added = await connection.fetchval(
        f"""INSERT INTO {kind.table} (service_id, name, {', '.join(columns)})
            VALUES ($1, $2, {placeholders}) RETURNING id""",
        service_id, name, *(values[column] for column in columns))
    synced.changes.append(f"{kind.label} '{name}' added")
    return added


async def _remove(connection: asyncpg.Connection, kind: Kind, name: str, entry_id: uuid.UUID,
                  now: datetime, synced: Synced) -> None:
    uses = await uses_of(connection, kind, entry_id, now)
    if uses.upcoming:
        bookings = "booking" if uses.upcoming == 1 else "bookings"
        synced.refusals.append(
            f"{kind.label} '{name}' is not in the file but has {uses.upcoming} upcoming "
            f"{bookings}: keep it until they are moved or cancelled")
    elif uses.any:
        await connection.execute(f"UPDATE {kind.table} SET retired_at = $2 WHERE id = $1",
                                 entry_id, now)
        synced.changes.append(f"{kind.label} '{name}' retired (past bookings name it)")
    else:
        await connection.execute(f"DELETE FROM {kind.table} WHERE id = $1", entry_id)
        synced.changes.append(f"{kind.label} '{name}' removed")
