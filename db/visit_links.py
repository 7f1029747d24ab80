"""A booking's links: its video visit's and its deposit's, and what the clinic's settings
say it should have (`terms`).

One link of each kind per appointment: keeping a second one finds the first (the
providers' requests are idempotent too, so a retried request never makes two rooms or
two payment links). A deposit is paid once the payment provider says so (`mark_paid`),
from its webhook or when the agent asks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from db.repositories import as_uuid
from db.scheduling import LIVE

KINDS = ("video", "payment")
# The job that makes the links a call could not, and texts them (runner/visit_link_jobs.py).
FINISH_JOB = "visit_links"


@dataclass(frozen=True)
class VisitTerms:
    """What a booked visit needs beyond the booking, from its type and its clinic."""

    appointment_id: str
    workspace_id: str
    patient_id: str
    patient_phone: str | None
    status: str
    starts_at: datetime
    ends_at: datetime
    type_name: str
    currency: str
    video: bool
    deposit_cents: int | None
    video_visits: dict[str, Any] | None  # the clinic's settings ({"provider": ...})

    @property
    def live(self) -> bool:
        return self.status in LIVE


@dataclass(frozen=True)
class VisitLink:
    id: str
    appointment_id: str
    kind: str
    provider: str
    external_id: str | None
    url: str
    amount_cents: int | None
    currency: str | None
    expires_at: datetime | None
    paid_at: datetime | None


async def terms(pool: asyncpg.Pool, appointment_id: str) -> VisitTerms | None:
    row = await pool.fetchrow(
        """SELECT a.id, s.workspace_id, a.patient_id, pt.phone, a.status, a.starts_at,
                  a.ends_at, t.name AS type_name, t.currency,
                  coalesce(t.video, false) AS video, t.deposit_cents, s.video_visits
           FROM appointments a JOIN appointment_types t ON t.id = a.appointment_type_id
           JOIN services s ON s.id = t.service_id JOIN patients pt ON pt.id = a.patient_id
           WHERE a.id = $1""", as_uuid(appointment_id))
    if row is None:
        return None
    return VisitTerms(
        str(row["id"]), str(row["workspace_id"]), str(row["patient_id"]), row["phone"],
        row["status"],
        row["starts_at"], row["ends_at"], row["type_name"], row["currency"], row["video"],
        row["deposit_cents"], row["video_visits"])


def _link(row: asyncpg.Record) -> VisitLink:
    return VisitLink(str(row["id"]), str(row["appointment_id"]), row["kind"], row["provider"],
                     row["external_id"], row["url"], row["amount_cents"], row["currency"],
                     row["expires_at"], row["paid_at"])


async def link_of(pool: asyncpg.Pool, appointment_id: str, kind: str) -> VisitLink | None:
    row = await pool.fetchrow(
        "SELECT * FROM visit_links WHERE appointment_id = $1 AND kind = $2",
        as_uuid(appointment_id), kind)
    return None if row is None else _link(row)


async def links_of(pool: asyncpg.Pool, appointment_id: str) -> dict[str, VisitLink]:
    rows = await pool.fetch("SELECT * FROM visit_links WHERE appointment_id = $1",
                            as_uuid(appointment_id))
    return {row["kind"]: _link(row) for row in rows}


async def latest_payment_link(pool: asyncpg.Pool, patient_id: str) -> VisitLink | None:
    """The deposit link of the patient's most recently booked live appointment."""
    row = await pool.fetchrow(
        """SELECT v.* FROM visit_links v JOIN appointments a ON a.id = v.appointment_id
           WHERE a.patient_id = $1 AND v.kind = 'payment' AND a.status = ANY ($2)
           ORDER BY v.created_at DESC LIMIT 1""", as_uuid(patient_id), list(LIVE))
    return None if row is None else _link(row)


async def keep(pool: asyncpg.Pool, terms: VisitTerms, kind: str, *, provider: str,
               url: str, external_id: str | None = None, amount_cents: int | None = None,
               currency: str | None = None, expires_at: datetime | None = None,
               call_id: str | None = None) -> VisitLink:
    """Keep the appointment's link of `kind`; the one already kept, if there is one."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of link {kind!r}")
    row = await pool.fetchrow(
        """INSERT INTO visit_links (workspace_id, appointment_id, kind, provider, external_id,
                                    url, amount_cents, currency, expires_at, call_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           ON CONFLICT (appointment_id, kind) DO NOTHING RETURNING *""",
        as_uuid(terms.workspace_id), as_uuid(terms.appointment_id), kind, provider,
        external_id, url, amount_cents, currency, expires_at, as_uuid(call_id))
    if row is not None:
        return _link(row)
    kept = await link_of(pool, terms.appointment_id, kind)
    assert kept is not None  # the conflict was this row
    return kept


async def mark_paid(pool: asyncpg.Pool, provider: str, external_id: str,
                    at: datetime) -> VisitLink | None:
    """The deposit behind this payment link is paid (the first time said is kept)."""
    row = await pool.fetchrow(
        """UPDATE visit_links SET paid_at = coalesce(paid_at, $3)
           WHERE kind = 'payment' AND provider = $1 AND external_id = $2 RETURNING *""",
        provider, external_id, at)
    return None if row is None else _link(row)
