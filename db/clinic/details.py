"""The clinic's own details: greeting, keyterms, video visits, and the numbers that reach it.

A number reaches one clinic at most, across every workspace: one already reaching
another clinic is a problem, never taken over. A number that stays keeps what Twilio
recorded about it (its SID, when it was connected).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import asyncpg

from db.clinic.model import ClinicDetails
from db.clinic.problems import Path
from db.clinic.state import ClinicState


@dataclass
class DetailsSynced:
    changes: list[str] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)


async def sync_details(connection: asyncpg.Connection, details: ClinicDetails,
                       state: ClinicState) -> DetailsSynced:
    synced = DetailsSynced()
    service_id = state.service_id
    if details.greeting != state.greeting:
        await connection.execute("UPDATE services SET greeting = $2 WHERE id = $1",
                                 service_id, details.greeting)
        synced.changes.append("greeting " + ("set" if details.greeting else "back to the default"))
    if list(details.keyterms) != state.keyterms:
        await connection.execute("UPDATE services SET keyterms = $2 WHERE id = $1",
                                 service_id, list(details.keyterms))
        synced.changes.append("keyterms updated")
    if details.video_visits != state.video_visits:
        await connection.execute(
            "UPDATE services SET video_visits = $2 WHERE id = $1", service_id,
            details.video_visits.model_dump(exclude_none=True) if details.video_visits else None)
        synced.changes.append("video visits " + (f"through {details.video_visits.provider}"
                                                 if details.video_visits else "off"))
    await _numbers(connection, service_id, details.phone_numbers, state.numbers, synced)
    return synced


async def _numbers(connection: asyncpg.Connection, service_id: uuid.UUID, wanted: list[str],
                   current: list[str], synced: DetailsSynced) -> None:
    elsewhere = {row["phone_number"] for row in await connection.fetch(
        """SELECT phone_number FROM service_numbers
           WHERE phone_number = ANY ($1) AND service_id <> $2
           UNION SELECT phone_number FROM locations
           WHERE phone_number = ANY ($1) AND service_id <> $2 AND retired_at IS NULL""",
        wanted, service_id)}
    for index, number in enumerate(wanted):
        if number in elsewhere:
            synced.problems.append((("clinic", "phone_numbers", index),
                                    (f"{number} already reaches another clinic: release it "
                                    "there first")))
    if synced.problems:
        return
    for number in await connection.fetch(
            """DELETE FROM service_numbers WHERE service_id = $1
               AND NOT (phone_number = ANY ($2)) RETURNING phone_number""",
            service_id, wanted):
        synced.changes.append(f"number {number['phone_number']} removed")
    for number in wanted:
        if number not in current:
            try:
                async with connection.transaction():  # a savepoint: a race is a problem
                    await connection.execute(
                        "INSERT INTO service_numbers (phone_number, service_id) VALUES ($1, $2)",
                        number, service_id)
            except asyncpg.UniqueViolationError:
                synced.problems.append((("clinic", "phone_numbers", wanted.index(number)),
                                        f"{number} already reaches another clinic"))
                continue
            synced.changes.append(f"number {number} added")
