"""Proposed keyterms as stored: one row per term and service, evidence bounded, each call
counted once, decided terms left alone; and the clinic vocabulary the batch pass hears."""

from __future__ import annotations

import uuid

from db import repositories as repo
from db import stt_suggestions as stt
from db.clinic_lexicon import call_clinic, clinic_lexicon
from db.seed import seed_world
from db.stt_suggestions import Misheard


async def new_call(db, workspace_id: str, service_id: str) -> str:
    return await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")


async def clinic(db, workspace_id: str, keyterms: list[str] | None = None) -> str:
    service = await repo.create_service(db.pool, workspace_id,
                                        f"clinic-{uuid.uuid4().hex[:6]}", keyterms=keyterms)
    return service["id"]


def seen(term: str, heard: str, at_ms: int, source: str = "verification",
         weight: float = 1.0) -> Misheard:
    return Misheard(term, heard, at_ms, source, weight)


async def test_sightings_of_one_term_in_any_case_make_one_suggestion(db, workspace_id):
    service_id = await clinic(db, workspace_id)
    first, second = await new_call(db, workspace_id, service_id), await new_call(
        db, workspace_id, service_id)

    assert await stt.record_misheard(db.pool, workspace_id, service_id, first, [
        seen("Tremfya", "trim fire", 1200, weight=1.5), seen("tremfya", "tram", 5100)]) == 1
    assert await stt.record_misheard(db.pool, workspace_id, service_id, second, [
        seen("TREMFYA", "", 800), seen("Brookhaven", "brook haven", 2000, "model:google")]) == 2
    rows = {s["term"]: s for s in await stt.list_suggestions(db.pool, workspace_id)}

    assert set(rows) == {"Tremfya", "Brookhaven"}  # the first spelling stays
    tremfya = rows["Tremfya"]
    assert (tremfya["calls_missed"], tremfya["score"], tremfya["status"]) == (2, 3.5, "proposed")
    assert [(e["call_id"], e["heard"], e["at_ms"]) for e in tremfya["evidence"]] == [
        (first, "trim fire", 1200), (first, "tram", 5100), (second, "", 800)]
    assert rows["Brookhaven"]["evidence"][0]["source"] == "model:google"
    listed = await stt.list_suggestions(db.pool, workspace_id, status="proposed")
    assert [s["term"] for s in listed] == ["Tremfya", "Brookhaven"]  # strongest first


async def test_a_call_verified_again_replaces_its_evidence_and_counts_once(db, workspace_id):
    service_id = await clinic(db, workspace_id)
    call_id = await new_call(db, workspace_id, service_id)
    for heard in ("sky rizzy", "sky rises"):
        await stt.record_misheard(db.pool, workspace_id, service_id, call_id,
                                  [seen("Skyrizi", heard, 3000)])

    [row] = await stt.list_suggestions(db.pool, workspace_id, service_id=service_id)

    assert (row["calls_missed"], row["score"]) == (1, 1.0)
    assert [e["heard"] for e in row["evidence"]] == ["sky rises"]


async def test_evidence_keeps_the_newest_sightings(db, workspace_id):
    service_id = await clinic(db, workspace_id)
    for n in range(stt.MAX_EVIDENCE + 4):
        call_id = await new_call(db, workspace_id, service_id)
        await stt.record_misheard(db.pool, workspace_id, service_id, call_id,
                                  [seen("Rinvoq", f"rin vote {n}", 100 * n)])

    [row] = await stt.list_suggestions(db.pool, workspace_id, service_id=service_id)

    assert row["calls_missed"] == stt.MAX_EVIDENCE + 4
    assert [e["at_ms"] for e in row["evidence"]] == [
        100 * n for n in range(4, stt.MAX_EVIDENCE + 4)]


async def test_decided_terms_and_keyterms_are_never_proposed_again(db, workspace_id):
    service_id = await clinic(db, workspace_id, keyterms=["Dr. Villanueva", "Humira"])
    call_id = await new_call(db, workspace_id, service_id)
    await stt.record_misheard(db.pool, workspace_id, service_id, call_id,
                              [seen("Entyvio", "and T vo", 100), seen("Otezla", "oh tesla", 200)])
    by_term = {s["term"]: s["id"] for s in await stt.list_suggestions(db.pool, workspace_id)}
    await stt.set_status(db.pool, workspace_id, by_term["Entyvio"], "rejected", "key vk_test")
    await stt.set_status(db.pool, workspace_id, by_term["Otezla"], "accepted", "key vk_test")
    later = await new_call(db, workspace_id, service_id)

    changed = await stt.record_misheard(db.pool, workspace_id, service_id, later, [
        seen("entyvio", "in TV oh", 50), seen("Otezla", "oh tesla", 60),
        seen("humira", "who mirror", 70), seen("x" * 61, "", 80), seen("  ", "", 90)])

    assert changed == 0
    rows = {s["term"]: s for s in await stt.list_suggestions(db.pool, workspace_id)}
    assert set(rows) == {"Entyvio", "Otezla"}
    assert rows["Entyvio"]["status"] == "rejected" and rows["Entyvio"]["calls_missed"] == 1
    assert rows["Otezla"]["decided_by"] == "key vk_test"


async def test_another_workspaces_service_takes_no_suggestion(db, workspace_id):
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    theirs = await clinic(db, other["id"])
    call_id = await new_call(db, other["id"], theirs)

    assert await stt.record_misheard(db.pool, workspace_id, theirs, call_id,
                                     [seen("Nurtec", "new tech", 10)]) == 0
    assert await stt.list_suggestions(db.pool, other["id"]) == []
    assert await stt.list_suggestions(db.pool, workspace_id, service_id="not-a-uuid") == []


async def test_the_clinic_vocabulary_has_its_names_and_chart_terms_but_no_patients(
        db, demo_clinic):
    workspace_id, service_id = demo_clinic
    await seed_world(db.pool, workspace_id)
    call_id = await new_call(db, workspace_id, service_id)
    await db.pool.execute("UPDATE practitioners SET retired_at = now() "
                          "WHERE service_id = $1 AND name = 'Leo Martin'", uuid.UUID(service_id))

    found = await call_clinic(db.pool, call_id)
    lexicon = await clinic_lexicon(db.pool, workspace_id, service_id)

    assert (found.workspace_id, found.service_id) == (workspace_id, service_id)
    assert "Dr. James Okafor" in lexicon.practitioners
    assert "Leo Martin" not in lexicon.practitioners  # retired
    assert "Physiotherapy session" in lexicon.appointment_types
    assert set(lexicon.locations) == {"Downtown", "Northside"}
    assert {"Metformin", "Lisinopril", "Apixaban"} <= set(lexicon.medications)
    assert {"Aetna", "Cigna", "Medicare"} <= set(lexicon.carriers)
    patients = await db.pool.fetch("SELECT first_name, last_name FROM patients "
                                   "WHERE workspace_id = $1", uuid.UUID(workspace_id))
    words = {w for term in lexicon.terms() for w in term.split()}
    assert patients and not any(p["last_name"] in words for p in patients)
