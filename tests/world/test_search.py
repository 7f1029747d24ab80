"""Semantic search over the world model: misspelled patients, partial details, events."""

from __future__ import annotations

import random
import uuid
from datetime import date

from db import repositories as repo
from db import world
from db.world import EventDraft, Provenance
from processors.world.index import PatientQuery
from tests.world.conftest import Clinic

FIRSTS = ("James Mary John Patricia Robert Jennifer Michael Linda William Elizabeth Ellen "
          "Eleni Leonor Helen Walter Harold").split()
LASTS = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Kowalczyk Kovacs Koval "
         "Walsh Chen Okafor Nguyen Lopez").split()


async def crowd(db, clinic: Clinic, count: int) -> None:
    """`count` other patients, many with similar names."""
    rng = random.Random(7)
    await db.pool.executemany(
        "INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        [(uuid.UUID(clinic.workspace_id), rng.choice(FIRSTS), rng.choice(LASTS),
          date(rng.randint(1930, 2005), rng.randint(1, 12), rng.randint(1, 28)))
         for _ in range(count)])


async def test_a_misspelled_name_finds_the_patient(db, clinic, index):
    await crowd(db, clinic, 400)
    assert await index.backfill(db.pool) > 0
    eleanor = await clinic.patient(db, "Eleanor", "Kowalski")

    matches = await index.search_patients(
        db.pool, clinic.workspace_id, PatientQuery(name="Elenor Kowalsky"))

    assert matches[0].patient.id == eleanor.id
    assert matches[0].name_score >= 0.85


async def test_a_date_of_birth_with_a_misheard_name_ranks_the_patient_first(db, clinic, index):
    await index.backfill(db.pool)
    eleanor = await clinic.patient(db, "Eleanor", "Kowalski")

    matches = await index.search_patients(db.pool, clinic.workspace_id, PatientQuery(
        name="Ellen Kowalskie", date_of_birth=date(1951, 6, 22)))

    assert matches[0].patient.id == eleanor.id
    assert "date_of_birth" in matches[0].matched


async def test_partial_details_a_surname_or_a_phone_alone(db, clinic, index):
    await index.backfill(db.pool)
    walsh = await clinic.patient(db, "Henry", "Walsh")

    by_surname = await index.search_patients(db.pool, clinic.workspace_id,
                                             PatientQuery(name="walsh"))
    by_phone = await index.search_patients(db.pool, clinic.workspace_id,
                                           PatientQuery(phone="(555) 010-0205"))

    assert walsh.id in [m.patient.id for m in by_surname]
    assert [m.patient.id for m in by_phone] == [walsh.id]


async def test_a_name_nobody_has_finds_nobody(db, clinic, index):
    await index.backfill(db.pool)
    matches = await index.search_patients(db.pool, clinic.workspace_id,
                                          PatientQuery(name="Zbigniew Oyelaran"))
    assert matches == []


async def test_another_workspace_s_patients_are_never_found(db, clinic, index):
    await index.backfill(db.pool)
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    matches = await index.search_patients(db.pool, other["id"],
                                          PatientQuery(name="Eleanor Kowalski"))
    assert matches == []


async def test_event_search_finds_by_meaning_within_one_patient(db, clinic, index):
    chen = await clinic.patient(db, "Margaret", "Chen")
    walsh = await clinic.patient(db, "Henry", "Walsh")
    call_id = await clinic.call(db)
    written = Provenance("tool", "tool:CreateInsurance", "high", call_id)
    ids = [await world.write_event(db.pool, clinic.workspace_id, EventDraft(
        kind, summary, {}, patient.id), written) for kind, summary, patient in (
        ("insurance_added", "Insurance added: Aetna, member id W123456789.", chen),
        ("outbound_call_scheduled", "Call back scheduled: lab results follow-up.", chen),
        ("insurance_added", "Insurance added: Cigna, member id U4829173.", walsh))]
    await index.index_events(db.pool, [(i, clinic.workspace_id, s) for i, s in zip(ids, (
        "Insurance added: Aetna, member id W123456789.",
        "Call back scheduled: lab results follow-up.",
        "Insurance added: Cigna, member id U4829173."), strict=True)])

    found = await index.search_events(db.pool, clinic.workspace_id, "insurance coverage change",
                                      patient_id=chen.id, limit=2)

    assert found[0].event.id == ids[0]
    assert all(m.event.patient_id == chen.id for m in found)
