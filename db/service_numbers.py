"""Which clinic a dialled number reaches, and numbers connected to a clinic.

A clinic is a service with at least one live location: a line with no location of its
own (the demo's check-in line) is no clinic, so it never makes a deployment look like
it has several. A call to a number no clinic owns lands in a workspace only by an
explicit rule: the deployment's fallback number (`UNKNOWN_NUMBER_FALLBACK`), else the
deployment's only clinic (the development set-up); otherwise the number is not in
service, and the call belongs to no workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import asyncpg
from loguru import logger

from db.repositories import (
    SERVICE_COLUMNS,
    JsonDict,
    _row_or_none,
    _rows,
    as_uuid,
    find_service_by_phone,
)

Executor = asyncpg.Pool | asyncpg.Connection
# The service `s` is a clinic: it has a live location.
IS_CLINIC = ("EXISTS (SELECT 1 FROM locations l WHERE l.service_id = s.id "
             "AND l.retired_at IS NULL)")


class Reached(StrEnum):
    """How a dialled number found its clinic."""

    OWNER = "owner"  # the clinic owns the number (or one of its locations has it)
    FALLBACK = "fallback"  # no owner: the deployment's fallback number's clinic
    ONLY_CLINIC = "only_clinic"  # no owner: the deployment has one clinic
    NOT_IN_SERVICE = "not_in_service"  # no owner, no fallback, not one clinic


@dataclass(frozen=True)
class DialledClinic:
    """The clinic (a `SERVICE_COLUMNS` row) a call reaches, and how; None: none."""

    service: JsonDict | None
    reached: Reached

    @property
    def in_service(self) -> bool:
        return self.service is not None

    @property
    def ids(self) -> tuple[str | None, str | None]:
        """(workspace, service), or (None, None)."""
        if self.service is None:
            return None, None
        return str(self.service["workspace_id"]), str(self.service["id"])


async def dialled_clinic(pool: asyncpg.Pool, number: str | None, *,
                         fallback_number: str | None) -> DialledClinic:
    """The clinic a call to `number` reaches (None when the caller's number is unknown,
    as in a browser session)."""
    if number:
        owner = await find_service_by_phone(pool, number)
        if owner is not None:
            return DialledClinic(owner, Reached.OWNER)
    if fallback_number:
        fallback = await find_service_by_phone(pool, fallback_number)
        if fallback is not None:
            return DialledClinic(fallback, Reached.FALLBACK)
        logger.warning("UNKNOWN_NUMBER_FALLBACK reaches no clinic; it is ignored")
    only = await only_clinic(pool)
    if only is not None:
        return DialledClinic(only, Reached.ONLY_CLINIC)
    return DialledClinic(None, Reached.NOT_IN_SERVICE)


async def only_clinic(pool: asyncpg.Pool) -> JsonDict | None:
    """The deployment's clinic when it has exactly one (None: none, or several)."""
    clinics = await pool.fetch(
        f"SELECT {SERVICE_COLUMNS} FROM services s WHERE {IS_CLINIC} LIMIT 2")
    return _row_or_none(clinics[0]) if len(clinics) == 1 else None


async def workspace_clinics(executor: Executor, workspace_id: str) -> list[JsonDict]:
    """The workspace's clinics (services with a live location), by name."""
    return _rows(await executor.fetch(
        f"""SELECT {SERVICE_COLUMNS} FROM services s
             WHERE s.workspace_id = $1 AND {IS_CLINIC}
             ORDER BY s.name""", as_uuid(workspace_id)))


async def number_row(executor: Executor, phone_number: str) -> JsonDict | None:
    """The number's `service_numbers` row with its clinic's name, if a clinic owns it."""
    return _row_or_none(await executor.fetchrow(
        """SELECT n.phone_number, n.service_id, s.workspace_id, s.name AS clinic,
                  n.twilio_sid, n.connected_at
             FROM service_numbers n JOIN services s ON s.id = n.service_id
            WHERE n.phone_number = $1""", phone_number))


async def record_twilio_number(executor: Executor, service_id: str, phone_number: str,
                               twilio_sid: str) -> JsonDict | None:
    """The number reaches the clinic, connected through Twilio as `twilio_sid` (now);
    None, and nothing written, when the number already reaches another clinic."""
    return _row_or_none(await executor.fetchrow(
        """INSERT INTO service_numbers (phone_number, service_id, twilio_sid, connected_at)
           VALUES ($1, $2, $3, now())
           ON CONFLICT (phone_number) DO UPDATE
              SET twilio_sid = EXCLUDED.twilio_sid, connected_at = EXCLUDED.connected_at
            WHERE service_numbers.service_id = EXCLUDED.service_id
           RETURNING phone_number, service_id, twilio_sid, connected_at""",
        phone_number, as_uuid(service_id), twilio_sid))
