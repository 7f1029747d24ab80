"""The right to erasure: an admin erases a patient of their own workspace, and what the
agent remembered of them goes too (no search finds it); others' memories stay."""

from __future__ import annotations

import uuid

from db import memories
from db.memories import MemoryCandidate
from services.embeddings import LocalEmbedder
from tests.api.app_client import bearer
from tests.api.outbound_world import add_patient, new_world

EMBEDDER = LocalEmbedder()


async def test_an_admin_erases_a_patient_and_their_memories_go_with_them(client, db, world):
    other = await add_patient(db.pool, world.workspace_id, "Bo")
    for person in (world.patient_id, other):
        await memories.remember(db.pool, person, [
            MemoryCandidate("I'm having knee surgery next month", "event"),
            MemoryCandidate("Mornings are best for me", "preference")], EMBEDDER, None)
    await db.pool.execute("INSERT INTO reminders (patient_id, text) VALUES ($1, 'Walk daily')",
                          uuid.UUID(world.patient_id))
    url = f"/api/patients/{world.patient_id}"

    as_operator = await client.delete(url, headers=bearer(world.keys["operator"]))
    erased = await client.delete(url, headers=bearer(world.keys["admin"]))
    again = await client.delete(url, headers=bearer(world.keys["admin"]))

    assert as_operator.status_code == 403
    assert erased.status_code == 204 and again.status_code == 404
    gone = uuid.UUID(world.patient_id)
    for table in ("patients", "memories", "reminders"):
        column = "id" if table == "patients" else "patient_id"
        assert await db.pool.fetchval(
            f"SELECT count(*) FROM {table} WHERE {column} = $1", gone) == 0, table
    assert await memories.recall(db.pool, world.patient_id) == []
    assert await memories.search(db.pool, world.patient_id, "surgery", EMBEDDER) == []
    kept = await memories.search(db.pool, other, "an operation coming up", EMBEDDER)
    assert [m.text for m in kept] == ["I'm having knee surgery next month"]
    logged = (await client.get("/api/audit", headers=bearer(world.keys["admin"]))).json()
    assert any(entry["action"] == "patient.erase" and entry["target"] == world.patient_id
               for entry in logged["entries"])


async def test_another_workspace_s_patient_is_not_found_and_stays(client, db, world):
    theirs = await new_world(db)
    await memories.remember(db.pool, theirs.patient_id, [
        MemoryCandidate("I need a Spanish interpreter", "fact")], EMBEDDER, None)

    tried = await client.delete(f"/api/patients/{theirs.patient_id}",
                                headers=bearer(world.keys["admin"]))
    malformed = await client.delete("/api/patients/not-an-id",
                                    headers=bearer(world.keys["admin"]))

    assert tried.status_code == 404 and malformed.status_code == 404
    assert [m.text for m in await memories.recall(db.pool, theirs.patient_id)] == [
        "I need a Spanish interpreter"]


async def test_erasing_a_patient_erases_their_calls_analyses_and_words_kept_as_evidence(
        client, db, world):
    theirs, someone_elses = (await call_of(db, world, world.patient_id),
                             await call_of(db, world, None))
    for call in (theirs, someone_elses):
        await db.pool.execute(
            "INSERT INTO call_analyses (call_id, workspace_id, patient_id, analyst, summary, "
            "quality, quality_score, duration_ms) VALUES ($1, $2, (SELECT patient_id FROM "
            "calls WHERE id = $1), 'rules', '{}', '{}', 3, 1)",
            uuid.UUID(call), uuid.UUID(world.workspace_id))
    await db.pool.execute(
        "INSERT INTO stt_suggestions (workspace_id, service_id, term, evidence) "
        "VALUES ($1, $2, 'Apixaban', $3)", uuid.UUID(world.workspace_id),
        uuid.UUID(world.clinic_id), [{"call_id": theirs, "heard": "a pixie band"},
                                     {"call_id": someone_elses, "heard": "apex a ban"}])

    erased = await client.delete(f"/api/patients/{world.patient_id}",
                                 headers=bearer(world.keys["admin"]))

    assert erased.status_code == 204
    analysed = await db.pool.fetch("SELECT call_id FROM call_analyses WHERE call_id = ANY($1)",
                                   [uuid.UUID(theirs), uuid.UUID(someone_elses)])
    assert [str(r["call_id"]) for r in analysed] == [someone_elses]
    evidence = await db.pool.fetchval("SELECT evidence FROM stt_suggestions WHERE term = "
                                      "'Apixaban' AND service_id = $1", uuid.UUID(world.clinic_id))
    assert [e["heard"] for e in evidence] == ["apex a ban"]
    assert await db.pool.fetchval("SELECT patient_id FROM calls WHERE id = $1",
                                  uuid.UUID(theirs)) is None  # the call stays, unnamed


async def call_of(db, world, patient_id: str | None) -> str:
    return str(await db.pool.fetchval(
        "INSERT INTO calls (workspace_id, service_id, direction, status, patient_id) "
        "VALUES ($1, $2, 'inbound', 'completed', $3) RETURNING id",
        uuid.UUID(world.workspace_id), uuid.UUID(world.clinic_id),
        uuid.UUID(patient_id) if patient_id else None))
