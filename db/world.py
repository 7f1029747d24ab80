"""Reads and writes of the world model (db/migrations/0007_world_model.sql).

Every write here is attributed: the entity row carries who wrote it, the call and a
confidence, and the same transaction adds a `clinical_events` row that the
verification pipeline judges after the call. Writes take the patient id they are
given; which patient a call may write is decided before this layer (processors/world/
write_safety.target_outside_scope), never here.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Literal

import asyncpg

from db import outbound
from db.repositories import as_uuid
from db.scheduling import Patient

Confidence = Literal["low", "moderate", "high", "verified"]
CONFIDENCE_ORDER: tuple[Confidence, ...] = ("low", "moderate", "high", "verified")
Verification = Literal["pending", "approved", "corrected", "flagged", "rejected"]
EventSource = Literal["tool", "extraction", "audio_verification", "verification", "operator",
                      "import", "practice"]


class DuplicatePatient(Exception):
    """Another record already has this name and date of birth."""


@dataclass(frozen=True)
class Provenance:
    """Who wrote a row, from which call (and caller turn), and how far it is trusted."""

    source: EventSource
    written_by: str  # "tool:CreateInsurance", "extraction", "verification:event_judge", ...
    confidence: Confidence
    call_id: str | None = None
    turn_seq: int | None = None


@dataclass(frozen=True)
class PatientRecord:
    id: str
    workspace_id: str
    first_name: str
    last_name: str
    date_of_birth: date
    phone: str | None
    email: str | None
    address: str | None
    mrn: str | None
    timezone: str | None
    preferences: dict[str, Any]
    confidence: Confidence
    written_by: str

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    def as_patient(self) -> Patient:
        """The identity a call's booking session keeps (db.scheduling.Patient)."""
        return Patient(self.id, self.first_name, self.last_name, self.date_of_birth,
                       self.phone)


@dataclass(frozen=True)
class Condition:
    name: str
    status: str


@dataclass(frozen=True)
class Medication:
    name: str
    dose: str
    frequency: str


@dataclass(frozen=True)
class Allergy:
    substance: str
    reaction: str
    severity: str


@dataclass(frozen=True)
class Coverage:
    id: str
    carrier_name: str
    plan_name: str
    member_id: str
    group_number: str
    subscriber_name: str
    relationship: str
    confidence: Confidence


@dataclass(frozen=True)
class ClinicalContext:
    """What the world model knows about one patient, for the ambient channel."""

    patient: PatientRecord
    conditions: list[Condition] = field(default_factory=list)
    medications: list[Medication] = field(default_factory=list)
    allergies: list[Allergy] = field(default_factory=list)
    coverages: list[Coverage] = field(default_factory=list)


@dataclass(frozen=True)
class Carrier:
    id: str
    name: str
    aliases: tuple[str, ...]
    payer_id: str | None


@dataclass(frozen=True)
class ClinicalEvent:
    id: str
    workspace_id: str
    patient_id: str | None
    call_id: str | None
    type: str
    payload: dict[str, Any]
    summary: str
    occurred_at: datetime
    source: EventSource
    written_by: str
    turn_seq: int | None
    confidence: Confidence
    verification: Verification
    notes: list[dict[str, Any]]
    entity_table: str | None
    entity_id: str | None
    review_action: str | None = None  # what a person must do, when flagged for more than a look


@dataclass(frozen=True)
class EventDraft:
    """An event about to be written (its provenance travels separately)."""

    type: str
    summary: str
    payload: dict[str, Any]
    patient_id: str | None
    entity_table: str | None = None
    entity_id: str | None = None


@dataclass(frozen=True)
class OutboundTaskSpec:
    reason: str
    goal: str
    priority: int
    timezone: str
    window_start: time
    window_end: time
    window_days: tuple[int, ...]
    not_before: datetime
    max_attempts: int
    retry_backoff_minutes: int


def _record(row: asyncpg.Record | dict[str, Any]) -> PatientRecord:
    return PatientRecord(
        str(row["id"]), str(row["workspace_id"]), row["first_name"], row["last_name"],
        row["date_of_birth"], row["phone"], row["email"], row["address"], row["mrn"],
        row["timezone"], _json(row["preferences"]), row["confidence"], row["written_by"],
    )


def _event(row: asyncpg.Record) -> ClinicalEvent:
    return ClinicalEvent(
        str(row["id"]), str(row["workspace_id"]),
        str(row["patient_id"]) if row["patient_id"] else None,
        str(row["call_id"]) if row["call_id"] else None, row["type"],
        _json(row["payload"]), row["summary"], row["occurred_at"], row["source"],
        row["written_by"], row["turn_seq"], row["confidence"], row["verification"],
        _json(row["verification_notes"]), row["entity_table"],
        str(row["entity_id"]) if row["entity_id"] else None, row["review_action"],
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


# --- Patients ----------------------------------------------------------------------


async def patient_record(pool: asyncpg.Pool, patient_id: str) -> PatientRecord | None:
    row = await pool.fetchrow("SELECT * FROM patients WHERE id = $1", as_uuid(patient_id))
    return _record(row) if row else None


async def patients_by_ids(pool: asyncpg.Pool, ids: list[str]) -> list[PatientRecord]:
    rows = await pool.fetch("SELECT * FROM patients WHERE id = ANY($1::uuid[])",
                            [as_uuid(i) for i in ids])
    return [_record(row) for row in rows]


async def patients_by_fields(
    pool: asyncpg.Pool, workspace_id: str, *, date_of_birth: date | None = None,
    phone: str | None = None, mrn: str | None = None, limit: int = 50,
) -> list[PatientRecord]:
    """Exact matches on whichever fields are given (at least one)."""
    if date_of_birth is None and phone is None and mrn is None:
        return []
    rows = await pool.fetch(
        """SELECT * FROM patients WHERE workspace_id = $1
             AND ($2::date IS NULL OR date_of_birth = $2)
             AND ($3::text IS NULL OR phone = $3)
             AND ($4::text IS NULL OR upper(mrn) = upper($4))
           ORDER BY last_name, first_name LIMIT $5""",
        as_uuid(workspace_id), date_of_birth, phone, mrn, limit,
    )
    return [_record(row) for row in rows]


CONTACT_FIELDS = ("phone", "email", "address")


async def update_contact(
    pool: asyncpg.Pool, workspace_id: str, patient_id: str, changes: dict[str, str],
    provenance: Provenance, *, record_event: bool = True,
) -> tuple[PatientRecord, str | None]:
    """Change a patient's phone, email or address; the record and the event id (None:
    `record_event` off, when the change applies an event already recorded)."""
    unknown = set(changes) - set(CONTACT_FIELDS)
    if unknown or not changes:
        raise ValueError(f"contact fields are {CONTACT_FIELDS}, not {sorted(unknown)}")
    async with pool.acquire() as conn, conn.transaction():
        before = await conn.fetchrow(
            "SELECT * FROM patients WHERE id = $1 AND workspace_id = $2 FOR UPDATE",
            as_uuid(patient_id), as_uuid(workspace_id))
        if before is None:
            raise LookupError("no such patient in this workspace")
        sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(changes, 2))
        n = len(changes) + 2
        row = await conn.fetchrow(
            f"""UPDATE patients SET {sets}, written_by = ${n}, confidence = ${n + 1},
                       updated_at = now() WHERE id = $1 RETURNING *""",
            as_uuid(patient_id), *changes.values(), provenance.written_by, provenance.confidence,
        )
        record = _record(row)
        if not record_event:
            return record, None
        previous = {name: before[name] for name in changes}
        event_id = await write_event(conn, workspace_id, EventDraft(
            "contact_updated", _contact_summary(record, changes),
            {"changes": changes, "previous": previous}, patient_id, "patients", patient_id,
        ), provenance)
    return record, event_id


IDENTITY_FIELDS = ("first_name", "last_name", "date_of_birth")


async def correct_registration(
    pool: asyncpg.Pool, workspace_id: str, patient_id: str, changes: dict[str, Any],
    provenance: Provenance,
) -> tuple[PatientRecord, str]:
    """Correct the name or birth date of a patient registered on this same call (and only
    such a patient: an established record's identity is not changed on a call); the record
    and the `registration_corrected` event, which keeps the previous values."""
    unknown = set(changes) - set(IDENTITY_FIELDS)
    if unknown or not changes:
        raise ValueError(f"identity fields are {IDENTITY_FIELDS}, not {sorted(unknown)}")
    async with pool.acquire() as conn, conn.transaction():
        before = await conn.fetchrow(
            """SELECT * FROM patients WHERE id = $1 AND workspace_id = $2
               AND created_by_call = $3 FOR UPDATE""",
            as_uuid(patient_id), as_uuid(workspace_id), as_uuid(provenance.call_id))
        if before is None:
            raise LookupError("no patient registered on this call with that id")
        sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(changes, 2))
        n = len(changes) + 2
        row = await conn.fetchrow(
            f"""UPDATE patients SET {sets}, written_by = ${n}, updated_at = now()
                WHERE id = $1 RETURNING *""",
            as_uuid(patient_id), *changes.values(), provenance.written_by)
        record = _record(row)
        shown = {k: v.isoformat() if isinstance(v, date) else v for k, v in changes.items()}
        previous = {k: before[k].isoformat() if isinstance(before[k], date) else before[k]
                    for k in changes}
        event_id = await write_event(conn, workspace_id, EventDraft(
            "registration_corrected",
            f"Registration corrected to {record.full_name}, born "
            f"{record.date_of_birth.isoformat()}.",
            {"changes": shown, "previous": previous}, patient_id, "patients", patient_id,
        ), provenance)
    return record, event_id


def _contact_summary(record: PatientRecord, changes: dict[str, str]) -> str:
    said = ", ".join(f"{name} {value}" for name, value in changes.items())
    return f"{record.full_name} updated contact details: {said}."


async def create_patient(
    pool: asyncpg.Pool, workspace_id: str, *, first_name: str, last_name: str,
    date_of_birth: date, phone: str | None, email: str | None, address: str | None,
    provenance: Provenance, phone_source: str = "said",
) -> tuple[PatientRecord, bool, str | None]:
    """The patient with this name and date of birth, created if new.

    Returns the record, whether it was created, and the event id (None: it existed).
    """
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone,
                                     email, address, created_by_call, written_by, confidence)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
               ON CONFLICT (workspace_id, lower(first_name), lower(last_name), date_of_birth)
               DO NOTHING RETURNING *""",
            as_uuid(workspace_id), first_name.strip(), last_name.strip(), date_of_birth, phone,
            email, address, as_uuid(provenance.call_id), provenance.written_by,
            provenance.confidence,
        )
        if row is None:
            existing = await conn.fetchrow(
                """SELECT * FROM patients WHERE workspace_id = $1 AND lower(first_name) =
                   lower($2) AND lower(last_name) = lower($3) AND date_of_birth = $4""",
                as_uuid(workspace_id), first_name.strip(), last_name.strip(), date_of_birth)
            return _record(existing), False, None
        record = _record(row)
        event_id = await write_event(conn, workspace_id, EventDraft(
            "patient_created",
            f"New patient {record.full_name}, born {record.date_of_birth.isoformat()}.",
            {"first_name": record.first_name, "last_name": record.last_name,
             "date_of_birth": record.date_of_birth.isoformat(), "phone": phone, "email": email,
             "address": address, "phone_source": phone_source},
            record.id, "patients", record.id,
        ), provenance)
    return record, True, event_id


# --- Clinical context (the ambient channel) ---------------------------------------


async def clinical_context(pool: asyncpg.Pool, patient_id: str) -> ClinicalContext | None:
    """The patient's record, active conditions and medications, allergies and active
    coverages, in one round trip."""
    row = await pool.fetchrow(
        """SELECT p.*,
             (SELECT coalesce(json_agg(json_build_object('name', c.name, 'status', c.status)
                     ORDER BY c.created_at), '[]')
                FROM conditions c WHERE c.patient_id = p.id AND c.status = 'active')
               AS conditions,
             (SELECT coalesce(json_agg(json_build_object('name', m.name, 'dose', m.dose,
                     'frequency', m.frequency) ORDER BY m.created_at), '[]')
                FROM medications m WHERE m.patient_id = p.id AND m.status = 'active')
               AS medications,
             (SELECT coalesce(json_agg(json_build_object('substance', a.substance,
                     'reaction', a.reaction, 'severity', a.severity) ORDER BY a.created_at), '[]')
                FROM allergies a WHERE a.patient_id = p.id) AS allergies,
             (SELECT coalesce(json_agg(json_build_object('id', v.id, 'carrier_name',
                     v.carrier_name, 'plan_name', v.plan_name, 'member_id', v.member_id,
                     'group_number', v.group_number, 'subscriber_name', v.subscriber_name,
                     'relationship', v.relationship, 'confidence', v.confidence)
                     ORDER BY v.updated_at DESC), '[]')
                FROM insurance_coverages v WHERE v.patient_id = p.id AND v.status = 'active')
               AS coverages
           FROM patients p WHERE p.id = $1""",
        as_uuid(patient_id),
    )
    if row is None:
        return None
    return ClinicalContext(
        _record(row),
        [Condition(**c) for c in _json(row["conditions"])],
        [Medication(**m) for m in _json(row["medications"])],
        [Allergy(**a) for a in _json(row["allergies"])],
        [Coverage(**{**v, "id": str(v["id"])}) for v in _json(row["coverages"])],
    )


# --- Insurance ---------------------------------------------------------------------


async def carriers(pool: asyncpg.Pool, workspace_id: str) -> list[Carrier]:
    rows = await pool.fetch(
        "SELECT * FROM insurance_carriers WHERE workspace_id = $1 ORDER BY name",
        as_uuid(workspace_id))
    return [Carrier(str(r["id"]), r["name"], tuple(r["aliases"]), r["payer_id"]) for r in rows]


async def add_carriers(pool: asyncpg.Pool, workspace_id: str, specs: Any) -> None:
    """Add carriers (anything with `name` and `aliases`) the workspace does not list yet."""
    await pool.executemany(
        """INSERT INTO insurance_carriers (workspace_id, name, aliases) VALUES ($1, $2, $3)
           ON CONFLICT (workspace_id, name) DO NOTHING""",
        [(as_uuid(workspace_id), spec.name, list(spec.aliases)) for spec in specs])


@dataclass(frozen=True)
class CoverageSpec:
    carrier_id: str | None
    carrier_name: str
    member_id: str
    plan_name: str = ""
    group_number: str = ""
    subscriber_name: str = ""
    subscriber_dob: date | None = None
    relationship: str = "self"


async def create_coverage(
    pool: asyncpg.Pool, workspace_id: str, patient_id: str, spec: CoverageSpec,
    provenance: Provenance, *, record_event: bool = True,
) -> tuple[Coverage, str | None]:
    """Add (or refresh) a coverage for the patient; the coverage and the event id (None:
    `record_event` off)."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """INSERT INTO insurance_coverages (patient_id, carrier_id, carrier_name, plan_name,
                   member_id, group_number, subscriber_name, subscriber_dob, relationship,
                   written_by, confidence, source_call)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
               ON CONFLICT (patient_id, carrier_name, member_id) DO UPDATE SET
                   plan_name = EXCLUDED.plan_name, group_number = EXCLUDED.group_number,
                   subscriber_name = EXCLUDED.subscriber_name,
                   subscriber_dob = EXCLUDED.subscriber_dob,
                   relationship = EXCLUDED.relationship, status = 'active',
                   written_by = EXCLUDED.written_by, confidence = EXCLUDED.confidence,
                   source_call = EXCLUDED.source_call, updated_at = now()
               RETURNING *""",
            as_uuid(patient_id), as_uuid(spec.carrier_id), spec.carrier_name, spec.plan_name,
            spec.member_id, spec.group_number, spec.subscriber_name, spec.subscriber_dob,
            spec.relationship, provenance.written_by, provenance.confidence,
            as_uuid(provenance.call_id),
        )
        coverage = Coverage(str(row["id"]), row["carrier_name"], row["plan_name"],
                            row["member_id"], row["group_number"], row["subscriber_name"],
                            row["relationship"], row["confidence"])
        if not record_event:
            return coverage, None
        payload = {
            "carrier_name": spec.carrier_name, "carrier_id": spec.carrier_id,
            "member_id": spec.member_id, "plan_name": spec.plan_name,
            "group_number": spec.group_number, "subscriber_name": spec.subscriber_name,
            "subscriber_dob": spec.subscriber_dob.isoformat() if spec.subscriber_dob else None,
            "relationship": spec.relationship,
        }
        event_id = await write_event(conn, workspace_id, EventDraft(
            "insurance_added",
            f"Insurance added: {spec.carrier_name}, member id {spec.member_id}.",
            payload, patient_id, "insurance_coverages", coverage.id,
        ), provenance)
    return coverage, event_id


# --- Preferences ---------------------------------------------------------------------


async def set_preference(
    pool: asyncpg.Pool, workspace_id: str, patient_id: str, kind: str, value: str,
    provenance: Provenance, *, quote: str = "",
) -> str:
    """Set one contact preference; the event keeps the caller's words that asked for it."""
    async with pool.acquire() as conn, conn.transaction():
        before = await conn.fetchval(
            """UPDATE patients SET preferences = preferences || jsonb_build_object($2::text,
                   $3::text), written_by = $4, confidence = $5, updated_at = now()
               WHERE id = $1 RETURNING preferences""",
            as_uuid(patient_id), kind, value, provenance.written_by, provenance.confidence)
        if before is None:
            raise LookupError("no such patient")
        return await write_event(conn, workspace_id, EventDraft(
            "preference_set", f"Contact preference: {kind.replace('_', ' ')} {value}.",
            {"preference": kind, "value": value, "user_quote": quote}, patient_id,
            "patients", patient_id,
        ), provenance)


# --- Outbound tasks ----------------------------------------------------------------


async def schedule_outbound(
    pool: asyncpg.Pool, workspace_id: str, patient_id: str, spec: OutboundTaskSpec,
    provenance: Provenance, *, service_id: str | None = None,
) -> tuple[str, str]:
    """The outbound task (with its dial job) and its event, in one transaction; (task id,
    event id)."""
    async with pool.acquire() as conn, conn.transaction():
        task_id = await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=workspace_id, service_id=service_id, kind="scheduled",
            reason=spec.reason, goal=spec.goal, timezone=spec.timezone,
            not_before=spec.not_before, priority=spec.priority, patient_id=patient_id,
            window_start=spec.window_start, window_end=spec.window_end,
            window_days=tuple(spec.window_days), max_attempts=spec.max_attempts,
            retry_backoff_minutes=spec.retry_backoff_minutes,
            written_by=provenance.written_by, confidence=provenance.confidence,
            source_call=provenance.call_id,
        ))
        event_id = await write_event(conn, workspace_id, EventDraft(
            "outbound_call_scheduled",
            f"Call back scheduled: {spec.reason} (goal: {spec.goal}), priority {spec.priority}.",
            {"reason": spec.reason, "goal": spec.goal, "priority": spec.priority,
             "timezone": spec.timezone, "window": [spec.window_start.isoformat(),
                                                   spec.window_end.isoformat()],
             "window_days": list(spec.window_days), "not_before": spec.not_before.isoformat(),
             "max_attempts": spec.max_attempts,
             "retry_backoff_minutes": spec.retry_backoff_minutes},
            patient_id, "outbound_tasks", str(task_id),
        ), provenance)
    return str(task_id), event_id


async def outbound_task(pool: asyncpg.Pool, task_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow("SELECT * FROM outbound_tasks WHERE id = $1", as_uuid(task_id))
    return dict(row) if row else None


# --- Events --------------------------------------------------------------------------


async def write_event(
    conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str, draft: EventDraft,
    provenance: Provenance,
) -> str:
    event_id = await conn.fetchval(
        """INSERT INTO clinical_events (workspace_id, patient_id, call_id, type, payload,
               summary, source, written_by, turn_seq, confidence, entity_table, entity_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id""",
        as_uuid(workspace_id), as_uuid(draft.patient_id), as_uuid(provenance.call_id),
        draft.type, draft.payload, draft.summary, provenance.source,
        provenance.written_by, provenance.turn_seq, provenance.confidence, draft.entity_table,
        as_uuid(draft.entity_id),
    )
    return str(event_id)


async def call_events(pool: asyncpg.Pool, call_id: str) -> list[ClinicalEvent]:
    rows = await pool.fetch(
        "SELECT * FROM clinical_events WHERE call_id = $1 ORDER BY occurred_at, id",
        as_uuid(call_id))
    return [_event(row) for row in rows]


async def events_by_ids(pool: asyncpg.Pool, ids: list[str]) -> list[ClinicalEvent]:
    rows = await pool.fetch("SELECT * FROM clinical_events WHERE id = ANY($1::uuid[])",
                            [as_uuid(i) for i in ids])
    return [_event(row) for row in rows]


async def patient_events(
    pool: asyncpg.Pool, patient_id: str, *, limit: int = 20
) -> list[ClinicalEvent]:
    rows = await pool.fetch(
        """SELECT * FROM clinical_events WHERE patient_id = $1 AND verification <> 'rejected'
           ORDER BY occurred_at DESC LIMIT $2""", as_uuid(patient_id), limit)
    return [_event(row) for row in rows]


async def judge_event(
    conn: asyncpg.Connection | asyncpg.Pool, event_id: str, *, verification: Verification,
    confidence: Confidence, note: dict[str, Any], payload: dict[str, Any] | None = None,
    summary: str | None = None,
) -> None:
    """Record one stage's verdict on an event (a correction replaces payload and summary)."""
    await conn.execute(
        """UPDATE clinical_events SET verification = $2, confidence = $3,
               verification_notes = verification_notes || $4::jsonb,
               payload = coalesce($5::jsonb, payload), summary = coalesce($6, summary)
           WHERE id = $1""",
        as_uuid(event_id), verification, confidence, [note], payload, summary,
    )


async def review_queue(
    pool: asyncpg.Pool, workspace_id: str, *, limit: int = 50
) -> list[ClinicalEvent]:
    """Flagged events awaiting a person, newest first."""
    rows = await pool.fetch(
        """SELECT * FROM clinical_events WHERE workspace_id = $1 AND verification = 'flagged'
           ORDER BY occurred_at DESC LIMIT $2""", as_uuid(workspace_id), limit)
    return [_event(row) for row in rows]


async def sync_ready(pool: asyncpg.Pool, workspace_id: str, *, limit: int = 100
                     ) -> list[ClinicalEvent]:
    """Verified events not yet pushed to the practice system, oldest first."""
    rows = await pool.fetch(
        """SELECT * FROM clinical_events WHERE workspace_id = $1 AND confidence = 'verified'
             AND verification IN ('approved', 'corrected') AND synced_at IS NULL
             AND source <> 'import'
           ORDER BY occurred_at LIMIT $2""", as_uuid(workspace_id), limit)
    return [_event(row) for row in rows]


async def mark_synced(pool: asyncpg.Pool, event_id: str, target: str,
                      error: str | None = None) -> None:
    await pool.execute(
        """UPDATE clinical_events SET synced_at = CASE WHEN $3::text IS NULL THEN now() END,
               sync_target = $2, sync_error = $3 WHERE id = $1""",
        as_uuid(event_id), target, error)


async def record_verification_run(
    pool: asyncpg.Pool, call_id: str, *, classification: str, reason: str, judge: str,
    counts: dict[str, int],
) -> None:
    await pool.execute(
        """INSERT INTO call_verifications (call_id, classification, reason, judge, counts)
           VALUES ($1, $2, $3, $4, $5)""",
        as_uuid(call_id), classification, reason[:300], judge, counts)


async def latest_verification(pool: asyncpg.Pool, call_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT * FROM call_verifications WHERE call_id = $1 ORDER BY ran_at DESC, id DESC "
        "LIMIT 1", as_uuid(call_id))
    if row is None:
        return None
    return {**dict(row), "counts": _json(row["counts"]), "call_id": str(row["call_id"])}


def new_id() -> str:
    return str(uuid.uuid4())


async def call_transcript(pool: asyncpg.Pool, call_id: str) -> list[tuple[str, str]]:
    """(speaker role, text) of each turn of a call, in order."""
    rows = await pool.fetch(
        "SELECT speaker_role, text FROM turns WHERE call_id = $1 ORDER BY seq",
        as_uuid(call_id))
    return [(row["speaker_role"], row["text"]) for row in rows]


async def call_workspace(pool: asyncpg.Pool, call_id: str) -> str | None:
    workspace = await pool.fetchval("SELECT workspace_id FROM calls WHERE id = $1",
                                    as_uuid(call_id))
    return str(workspace) if workspace else None
