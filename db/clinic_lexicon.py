"""The words a clinic's calls are likely to contain that a recognizer may not know.

The batch re-transcription of a call hears more when it is told the clinic's vocabulary:
its practitioners, appointment types and locations, and the medication and insurance
carrier names on the workspace's patients' charts. Patients' names are never part of it
(a lexicon is sent to the transcription provider; a chart's names are not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from db.repositories import as_uuid


@dataclass(frozen=True)
class CallClinic:
    """Which clinic a call reached, and the keyterm layers its profile was built from."""

    workspace_id: str
    service_id: str | None
    service_keyterms: tuple[str, ...]
    voice_settings: Any  # the stored JSON, parsed by call.voice_settings


@dataclass(frozen=True)
class ClinicLexicon:
    practitioners: tuple[str, ...] = ()
    appointment_types: tuple[str, ...] = ()
    locations: tuple[str, ...] = ()
    medications: tuple[str, ...] = ()
    carriers: tuple[str, ...] = ()

    def terms(self) -> list[str]:
        """Every term, in that order (the first are kept when a list must be cut)."""
        return [*self.practitioners, *self.appointment_types, *self.locations,
                *self.medications, *self.carriers]


async def call_clinic(pool: asyncpg.Pool, call_id: str) -> CallClinic | None:
    """The call's workspace and service (None: no such call, or a call of no workspace)."""
    row = await pool.fetchrow(
        """SELECT c.workspace_id, c.service_id, s.keyterms, v.settings
             FROM calls c LEFT JOIN services s ON s.id = c.service_id
             LEFT JOIN voice_settings v ON v.workspace_id = c.workspace_id
            WHERE c.id = $1""", as_uuid(call_id))
    if row is None or row["workspace_id"] is None:
        return None
    return CallClinic(str(row["workspace_id"]),
                      None if row["service_id"] is None else str(row["service_id"]),
                      tuple(row["keyterms"] or ()), row["settings"])


async def clinic_lexicon(pool: asyncpg.Pool, workspace_id: str,
                         service_id: str | None) -> ClinicLexicon:
    """The clinic's current names (retired ones left out) and its workspace's chart
    vocabulary; a call that reached no service has the chart vocabulary alone."""
    service, workspace = as_uuid(service_id), as_uuid(workspace_id)

    async def names(query: str, key: Any) -> tuple[str, ...]:
        if key is None:
            return ()
        return tuple(row["name"] for row in await pool.fetch(query, key))

    return ClinicLexicon(
        practitioners=await names(
            "SELECT name FROM practitioners WHERE service_id = $1 AND retired_at IS NULL "
            "ORDER BY name", service),
        appointment_types=await names(
            "SELECT name FROM appointment_types WHERE service_id = $1 AND retired_at IS NULL "
            "ORDER BY name", service),
        locations=await names(
            "SELECT name FROM locations WHERE service_id = $1 AND retired_at IS NULL "
            "ORDER BY name", service),
        medications=await names(
            """SELECT DISTINCT m.name FROM medications m JOIN patients p ON p.id = m.patient_id
               WHERE p.workspace_id = $1 AND m.status = 'active' ORDER BY m.name""", workspace),
        carriers=await names(
            """SELECT name FROM insurance_carriers WHERE workspace_id = $1
               UNION SELECT v.carrier_name FROM insurance_coverages v
                       JOIN patients p ON p.id = v.patient_id
                      WHERE p.workspace_id = $1 AND v.status = 'active'
               ORDER BY name""", workspace),
    )
