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
