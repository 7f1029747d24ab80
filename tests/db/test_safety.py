"""A workspace's own safety concepts, embedded when created, and the operator queue."""

import numpy as np
import pytest

from db import control
from db.records import EscalationRecord, write_records
from processors.safety import concept_store as safety
from processors.safety.concepts import ConceptSpec, default_concepts
from processors.safety.judge import RulesJudge
from processors.safety.monitor import SafetyServices
from services.embeddings import LocalEmbedder

GAMBLING = ConceptSpec(
    key="gambling_crisis", name="Gambling crisis", severity="soft",
    description="The caller says gambling has put them in danger.",
    examples=["I gambled away all my money", "I can't stop gambling and I'm desperate"],
)


class CountingEmbedder(LocalEmbedder):
    model = "counting-test-model"

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts):
        self.calls += 1
        return self.embed_now(texts)


async def test_a_custom_concept_is_stored_with_its_embeddings_and_found_in_calls(
    db, workspace_id
):
    embedder = LocalEmbedder()
    await safety.create_safety_concept(db.pool, workspace_id, GAMBLING, embedder)

    ((concept, vectors),) = await safety.workspace_concepts(db.pool, workspace_id, embedder)
    assert concept.key == "gambling_crisis" and concept.workspace_id == workspace_id
    assert vectors.shape == (2, 256)
    assert np.allclose(vectors, embedder.embed_now(GAMBLING.examples), atol=1e-5)
    row = await db.pool.fetchrow(
        "SELECT model, dimension FROM safety_concept_embeddings LIMIT 1")
    assert dict(row) == {"model": embedder.model, "dimension": 256}

    defaults = await SafetyServices(embedder=embedder, judge=RulesJudge()).index()
    index = defaults.with_concepts([(concept, vectors)])
    assessment = index.assess(embedder.embed_now(["I gambled away all my money"])[0],
                              escalate_at=0.85, candidate_at=0.45)
    assert assessment.escalate[0].concept.key == "gambling_crisis"
    assert len(defaults.concepts) == len(default_concepts())  # the defaults' index is not changed


async def test_a_new_embedding_model_embeds_stored_concepts_once(db, workspace_id):
    await safety.create_safety_concept(db.pool, workspace_id, GAMBLING, LocalEmbedder())
    other = CountingEmbedder()
    await safety.workspace_concepts(db.pool, workspace_id, other)
    await safety.workspace_concepts(db.pool, workspace_id, other)
    assert other.calls == 1


async def test_defaults_cannot_be_shadowed_and_keys_are_unique_per_workspace(db, workspace_id):
    with pytest.raises(safety.ConceptError, match="default"):
        await safety.create_safety_concept(
            db.pool, workspace_id, GAMBLING.model_copy(update={"key": "self_harm"}),
            LocalEmbedder())
    await safety.create_safety_concept(db.pool, workspace_id, GAMBLING, LocalEmbedder())
    with pytest.raises(safety.ConceptError, match="already"):
        await safety.create_safety_concept(db.pool, workspace_id, GAMBLING, LocalEmbedder())
    assert await safety.delete_safety_concept(db.pool, workspace_id, "gambling_crisis")
    assert await safety.workspace_concepts(db.pool, workspace_id, LocalEmbedder()) == []


async def test_escalations_written_by_a_call_form_the_operator_queue(db, workspace_id, call_id):
    async with db.pool.acquire() as conn:
        await write_records(conn, [
            EscalationRecord(call_id, 1, "suicidal_ideation", "hard", 0.97, None, "x", 1200),
            EscalationRecord(call_id, 1, "suicidal_ideation", "hard", 0.97, None, "x", 1200),
        ])
    (queued,) = await control.list_escalations(db.pool, workspace_id, status="open")
    assert (queued["call_id"], queued["concept"], queued["status"]) == (
        call_id, "suicidal_ideation", "open")
    assert await control.list_escalations(
        db.pool, "00000000-0000-0000-0000-000000000000", status="open") == []
