"""A clinic file applied to the database, and the database written back as a file.

An import is one transaction: the clinic (found by name in the workspace, created if
new), its numbers, locations, practitioners and appointment types (matched by name),
its weekly hours and closures (replaced), and an audit row when anything changed. It
never changes or loses a booking: what bookings still name is retired rather than
deleted, and removing what has live bookings to come is refused. A problem only the
database can see (a number another clinic owns) refuses the whole import; nothing is
changed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from db import audit
from db.clinic.bookings import misplaced_bookings
from db.clinic.calendar import (
    ClosureRow,
    ScheduleRow,
    closure_rows,
    same_hours,
    schedule_rows,
)
from db.clinic.changes import booking_warnings, closure_changes, hours_changes
from db.clinic.checks import check_sections
from db.clinic.details import sync_details
from db.clinic.entities import sync_entries
from db.clinic.kinds import APPOINTMENT_TYPES, KINDS, LOCATIONS, PRACTITIONERS
from db.clinic.model import ClinicFile
from db.clinic.problems import ClinicFileInvalid, Path, Problem, bounded, render_path
from db.clinic.sections import Sections
from db.clinic.state import ClinicState, read_state
from db.repositories import SERVICE_COLUMNS, _rows, as_uuid
from db.service_numbers import IS_CLINIC

ACTION = "clinic.import"


@dataclass
class ImportResult:
    service_id: str
    created: bool
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _DryRun(Exception):
    def __init__(self, result: ImportResult) -> None:
        self.result = result


async def import_clinic(pool: asyncpg.Pool, workspace_id: str, clinic: ClinicFile, *,
                        actor: str = audit.CLI_ACTOR, dry_run: bool = False,
                        now: datetime | None = None) -> ImportResult:
    """Apply `clinic` to the workspace atomically; with `dry_run`, roll back and return
    what would have changed. Raises ClinicFileInvalid (and changes nothing) for problems
    only the database can see."""
    try:
        async with pool.acquire() as connection, connection.transaction():
            result = await apply_clinic(connection, workspace_id, clinic, actor=actor,
                                        now=now or datetime.now(UTC))
            if dry_run:
                raise _DryRun(result)
            return result
    except _DryRun as rolled_back:
        return rolled_back.result


async def apply_clinic(connection: asyncpg.Connection, workspace_id: str, clinic: ClinicFile,
                       *, actor: str, now: datetime) -> ImportResult:
    """`import_clinic` on a connection whose transaction the caller holds."""
    workspace = as_uuid(workspace_id)
    if workspace is None or not await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)", workspace):
        raise ClinicFileInvalid([Problem("", None, "no such workspace")])
    _raise_problems(clinic, check_sections(Sections.of(clinic), clinic.line_of))
    service_id, created = await _find_or_create(connection, workspace, clinic.clinic.name)
    before = await read_state(connection, service_id)
    result = ImportResult(str(service_id), created,
                          [f"clinic '{clinic.clinic.name}' created"] if created else [])
    details = await sync_details(connection, clinic.clinic, before)
    result.changes += details.changes
    applied = await _sections(connection, service_id, clinic, before, now)
    result.changes += applied.changes
    result.warnings += applied.warnings
    _raise_problems(clinic, [*details.problems, *applied.problems])
    if result.changes:
        after = await read_state(connection, service_id)
        await audit.record_change(
            connection, str(workspace), actor=actor, action=ACTION, target=clinic.clinic.name,
            before=None if created else before.to_file().as_data(),
            after=after.to_file().as_data())
    return result


def _raise_problems(clinic: ClinicFile, problems: list[tuple[Path, str]]) -> None:
    if problems:
        raise ClinicFileInvalid(bounded(
            Problem(render_path(path), clinic.line_of(path), message)
            for path, message in problems))


@dataclass
class Applied:
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)


async def apply_sections(connection: asyncpg.Connection, service_id: str, clinic: ClinicFile,
                         *, now: datetime) -> ImportResult:
    """Locations, practitioners, appointment types, hours and closures of an existing
    clinic made what the file says; its name, numbers, greeting and keyterms are left as
    they are (the demo's fixtures fill clinics of their own this way)."""
    service = uuid.UUID(service_id)
    _raise_problems(clinic, check_sections(Sections.of(clinic), clinic.line_of))
    applied = await _sections(connection, service, clinic, await read_state(connection, service),
                              now)
    _raise_problems(clinic, applied.problems)
    return ImportResult(service_id, False, applied.changes, applied.warnings)


async def _sections(connection: asyncpg.Connection, service_id: uuid.UUID, clinic: ClinicFile,
                    before: ClinicState, now: datetime) -> Applied:
    applied = Applied()
    await connection.execute(  # bookings wait for the change, as they wait for each other
        "SELECT 1 FROM practitioners WHERE service_id = $1 FOR UPDATE", service_id)
    misplaced_before = await misplaced_bookings(connection, service_id, now)
    ids: dict[str, dict[str, uuid.UUID]] = {}
    for kind in KINDS:
        synced = await sync_entries(connection, service_id, kind, getattr(clinic, kind.section),
                                    before.of(kind), now)
        ids[kind.section] = synced.ids
        applied.changes += synced.changes
        applied.problems += [((kind.section,), reason) for reason in synced.refusals]
    if applied.problems:
        return applied
    wanted_hours = schedule_rows(clinic)
    if not same_hours(before.schedules, wanted_hours):
        await _replace_hours(connection, service_id, wanted_hours, ids)
        applied.changes += hours_changes(before.schedules, wanted_hours)
    wanted_closures = closure_rows(clinic)
    if set(before.closures) != set(wanted_closures):
        await _replace_closures(connection, service_id, wanted_closures, ids)
        applied.changes += closure_changes(before.closures, wanted_closures)
    misplaced = await misplaced_bookings(connection, service_id, now)
    applied.warnings += booking_warnings(misplaced_before, misplaced)
    return applied


async def export_clinic(pool: asyncpg.Pool, workspace_id: str,
                        service_id: str) -> ClinicFile | None:
    """The clinic as a file (live entries only), or None when the workspace has no such
    clinic. Importing it changes nothing."""
    workspace, service = as_uuid(workspace_id), as_uuid(service_id)
    if workspace is None or service is None:
        return None
    async with pool.acquire() as connection, connection.transaction(readonly=True):
        owned = await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM services WHERE id = $1 AND workspace_id = $2)",
            service, workspace)
        return (await read_state(connection, service)).to_file() if owned else None


async def list_clinics(pool: asyncpg.Pool, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's clinics (services with a live location, so not a line such as
    the demo's check-in line), oldest first: id, name, numbers, how many live
    locations, practitioners and appointment types each has, and how many of its
    closures end today or later."""
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return []
    return _rows(await pool.fetch(
        f"""SELECT {SERVICE_COLUMNS},
                  (SELECT count(*) FROM locations WHERE service_id = s.id
                     AND retired_at IS NULL) AS locations,
                  (SELECT count(*) FROM practitioners WHERE service_id = s.id
                     AND retired_at IS NULL) AS practitioners,
                  (SELECT count(*) FROM appointment_types WHERE service_id = s.id
                     AND retired_at IS NULL) AS appointment_types,
                  (SELECT count(*) FROM closures WHERE service_id = s.id
                     AND ends_on >= CURRENT_DATE) AS closures_upcoming
           FROM services s WHERE s.workspace_id = $1 AND {IS_CLINIC}
           ORDER BY s.created_at, s.name""",
        workspace))


async def _find_or_create(connection: asyncpg.Connection, workspace: uuid.UUID,
                          name: str) -> tuple[uuid.UUID, bool]:
    """The clinic's id, locked for this transaction (two imports of one clinic queue)."""
    found = await connection.fetchval(
        "SELECT id FROM services WHERE workspace_id = $1 AND name = $2 FOR UPDATE",
        workspace, name)
    if found is not None:
        return found, False
    created = await connection.fetchval(
        """INSERT INTO services (workspace_id, name) VALUES ($1, $2)
           ON CONFLICT (workspace_id, name) DO NOTHING RETURNING id""", workspace, name)
    if created is not None:
        return created, True
    return await connection.fetchval(
        "SELECT id FROM services WHERE workspace_id = $1 AND name = $2 FOR UPDATE",
        workspace, name), False


async def _replace_hours(connection: asyncpg.Connection, service_id: uuid.UUID,
                         rows: list[ScheduleRow], ids: dict[str, dict[str, uuid.UUID]]) -> None:
    await connection.execute(
        """DELETE FROM schedules WHERE practitioner_id IN
               (SELECT id FROM practitioners WHERE service_id = $1)""", service_id)
    types = ids[APPOINTMENT_TYPES.section]
    await connection.executemany(
        """INSERT INTO schedules (practitioner_id, location_id, weekday, starts, ends,
               appointment_type_ids, valid_from, valid_until)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
        [(ids[PRACTITIONERS.section][row.practitioner], ids[LOCATIONS.section][row.location],
          row.weekday, row.starts, row.ends, [types[name] for name in row.offers],
          row.valid_from, row.valid_until) for row in rows])


async def _replace_closures(connection: asyncpg.Connection, service_id: uuid.UUID,
                            rows: list[ClosureRow],
                            ids: dict[str, dict[str, uuid.UUID]]) -> None:
    await connection.execute("DELETE FROM closures WHERE service_id = $1", service_id)
    await connection.executemany(
        """INSERT INTO closures (service_id, location_id, starts_on, ends_on, reason)
           VALUES ($1, $2, $3, $4, $5)""",
        [(service_id, None if row.location is None else ids[LOCATIONS.section][row.location],
          row.starts_on, row.ends_on, row.reason) for row in rows])
