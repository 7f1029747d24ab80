"""A clinic as the database holds it now (live entries only), read on the caller's
connection so an import compares against what its own transaction sees."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from db.clinic.calendar import (
    ClosureRow,
    ScheduleRow,
    closure_entries,
    schedule_entries,
)
from db.clinic.kinds import APPOINTMENT_TYPES, KINDS, LOCATIONS, PRACTITIONERS, Kind
from db.clinic.model import VERSION, ClinicDetails, ClinicFile, VideoVisitSettings


@dataclass
class Stored:
    """A live entry and its row id."""

    id: uuid.UUID
    entry: Any


@dataclass
class ClinicState:
    service_id: uuid.UUID
    name: str
    greeting: str | None
    keyterms: list[str]
    numbers: list[str]
    video_visits: VideoVisitSettings | None = None
    entries: dict[str, dict[str, Stored]] = field(default_factory=dict)  # section → name →
    schedules: list[ScheduleRow] = field(default_factory=list)
    closures: list[ClosureRow] = field(default_factory=list)

    def of(self, kind: Kind) -> dict[str, Stored]:
        return self.entries.get(kind.section, {})

    def to_file(self) -> ClinicFile:
        """The clinic file that says this state."""
        def entries(kind: Kind) -> list[Any]:
            return [stored.entry for _, stored in sorted(self.of(kind).items())]

        return ClinicFile(
            version=VERSION,
            clinic=ClinicDetails(name=self.name, phone_numbers=self.numbers,
                                 greeting=self.greeting, keyterms=self.keyterms,
                                 video_visits=self.video_visits),
            locations=entries(LOCATIONS), practitioners=entries(PRACTITIONERS),
            appointment_types=entries(APPOINTMENT_TYPES),
            schedules=schedule_entries(self.schedules),
            closures=closure_entries(self.closures))


async def read_state(connection: asyncpg.Connection, service_id: uuid.UUID) -> ClinicState:
    service = await connection.fetchrow(
        """SELECT name, greeting, keyterms, video_visits,
                  ARRAY(SELECT phone_number FROM service_numbers WHERE service_id = s.id
                        ORDER BY created_at, phone_number) AS numbers
           FROM services s WHERE id = $1""", service_id)
    video = service["video_visits"]
    state = ClinicState(service_id, service["name"], service["greeting"] or None,
                        list(service["keyterms"] or []), list(service["numbers"]),
                        VideoVisitSettings.model_validate(video) if video else None)
    for kind in KINDS:
        rows = await connection.fetch(
            f"""SELECT id, name, {', '.join(kind.columns)} FROM {kind.table}
                WHERE service_id = $1 AND retired_at IS NULL""", service_id)
        state.entries[kind.section] = {row["name"]: Stored(row["id"], kind.from_row(row))
                                       for row in rows}
    type_names = {stored.id: name for name, stored in state.of(APPOINTMENT_TYPES).items()}
    for row in await connection.fetch(
            """SELECT p.name AS practitioner, l.name AS location, s.weekday, s.starts, s.ends,
                      s.appointment_type_ids, s.valid_from, s.valid_until
               FROM schedules s JOIN practitioners p ON p.id = s.practitioner_id
               JOIN locations l ON l.id = s.location_id
               WHERE p.service_id = $1 AND p.retired_at IS NULL AND l.retired_at IS NULL
               ORDER BY p.name, s.weekday, s.starts""", service_id):
        offers = tuple(type_names[t] for t in row["appointment_type_ids"] if t in type_names)
        if offers:
            state.schedules.append(ScheduleRow(
                row["practitioner"], row["location"], row["weekday"], row["starts"],
                row["ends"], offers, row["valid_from"], row["valid_until"]))
    for row in await connection.fetch(
            """SELECT l.name AS location, c.starts_on, c.ends_on, c.reason FROM closures c
               LEFT JOIN locations l ON l.id = c.location_id
               WHERE c.service_id = $1 AND (c.location_id IS NULL OR l.retired_at IS NULL)""",
            service_id):
        state.closures.append(ClosureRow(row["location"], row["starts_on"], row["ends_on"],
                                         row["reason"]))
    return state
