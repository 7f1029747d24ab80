"""A patient's memories across calls: said again is one memory, stronger; unsaid ones fade;
found by meaning (by words when the embedder fails); never another patient's."""

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from config import MemorySettings, Settings
from db import memories, world
from db import repositories as repo
from db.memories import MemoryCandidate
from db.world import Provenance
from services.embeddings import LocalEmbedder

EMBEDDER = LocalEmbedder()
POLICY = MemorySettings()

# Calibration of MEMORY_DEDUPE_SIMILARITY with the local embedder: the same thing put
# another way is one memory; alike sentences that say different things are two.
SAID_AGAIN = [
    ("I prefer morning appointments", "Morning appointments suit me best"),
    ("Please call my cell phone", "Call me on my cell please"),
    ("I'm having knee surgery next month", "I have a knee operation coming up next month"),
    ("I need a Spanish interpreter", "I need an interpreter for Spanish"),
    ("I use a wheelchair", "I'm in a wheelchair"),
    ("I'd like to see Dr. Patel", "I prefer seeing Doctor Patel"),
    ("My lower back has been hurting for weeks", "I've had lower back pain for a few weeks"),
    ("I'm travelling to Spain in June", "I'll be away in Spain in June"),
    ("Tuesdays are best for me", "I prefer Tuesdays"),
    ("I prefer the downtown clinic", "The downtown clinic is best for me"),
    ("I'm hard of hearing", "I am hard of hearing, please speak up"),
    ("I prefer a female practitioner", "I'd prefer to see a female practitioner"),
]
DIFFERENT = [
    ("I prefer morning appointments", "I prefer afternoon appointments"),
    ("I'm having knee surgery next month", "I'm having hip surgery next month"),
    ("I need a Spanish interpreter", "I need a Mandarin interpreter"),
    ("I'd like to see Dr. Patel", "I'd like to see Dr. Nguyen"),
    ("My lower back has been hurting for weeks", "My shoulder has been hurting for weeks"),
    ("Tuesdays are best for me", "Fridays are best for me"),
    ("I'm travelling to Spain in June", "I'm travelling to Spain in August"),
    ("Please call my cell phone", "Please don't call my work number"),
    ("I have diabetes", "I have high blood pressure"),
    ("I prefer the downtown clinic", "I prefer the Northside clinic"),
    ("My knee hurts", "My knee surgery is next week"),
    ("I use a wheelchair", "I can't drive so I need transport"),
]


async def patient(db, workspace_id: str, first: str) -> str:
    record, _, _ = await world.create_patient(
        db.pool, workspace_id, first_name=first, last_name="Memory",
        date_of_birth=date(1960, 3, 4), phone=None, email=None, address=None,
        provenance=Provenance("import", "test", "verified"))
    return record.id


async def a_call(db, workspace_id: str) -> str:
    return await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")


def said(text: str, kind: str = "preference") -> MemoryCandidate:
    return MemoryCandidate(text, kind, turn_seq=1)


class BrokenEmbedder:
    model = "broken"

    async def embed(self, texts: list[str]) -> np.ndarray:
        raise TimeoutError("the embeddings service did not answer")


def test_the_dedupe_threshold_is_a_setting_with_its_flat_name():
    assert Settings(_env_file=None, memory_dedupe_similarity=0.8).memory.dedupe_similarity == 0.8
    assert Settings(_env_file=None, memory_half_life_days=30).memory.half_life_days == 30


@pytest.mark.parametrize(("first", "second"), SAID_AGAIN)
async def test_the_same_thing_said_again_on_a_later_call_is_one_stronger_memory(
        db, workspace_id, first, second):
    person = await patient(db, workspace_id, "Ada")
    one, two = await a_call(db, workspace_id), await a_call(db, workspace_id)
    await memories.remember(db.pool, person, [said(first)], EMBEDDER, one)
    again = await memories.remember(db.pool, person, [said(second)], EMBEDDER, two)

    kept = await memories.recall(db.pool, person)
    assert len(again.reinforced) == 1 and again.added == []
    assert [(m.text, m.reinforcements) for m in kept] == [(second, 1)]  # the newer wording


@pytest.mark.parametrize(("first", "second"), DIFFERENT)
async def test_alike_sentences_that_say_different_things_are_two_memories(
        db, workspace_id, first, second):
    person = await patient(db, workspace_id, "Bea")
    one, two = await a_call(db, workspace_id), await a_call(db, workspace_id)
    await memories.remember(db.pool, person, [said(first)], EMBEDDER, one)
    await memories.remember(db.pool, person, [said(second)], EMBEDDER, two)

    assert sorted(m.text for m in await memories.recall(db.pool, person)) == sorted(
        [first, second])


async def test_a_retried_job_or_a_call_saying_it_twice_reinforces_nothing(db, workspace_id):
    person = await patient(db, workspace_id, "Cy")
    call = await a_call(db, workspace_id)
    batch = [said("I prefer Tuesdays"), said("Tuesdays are best for me")]
    await memories.remember(db.pool, person, batch, EMBEDDER, call)
    await memories.remember(db.pool, person, batch, EMBEDDER, call)

    kept = await memories.recall(db.pool, person)
    assert [(m.text, m.reinforcements) for m in kept] == [("Tuesdays are best for me", 0)]


async def test_memories_fade_by_half_life_and_what_is_said_again_fades_slower(
        db, workspace_id):
    person = await patient(db, workspace_id, "Di")
    one, two = await a_call(db, workspace_id), await a_call(db, workspace_id)
    await memories.remember(db.pool, person, [said("I use a wheelchair", "fact")], EMBEDDER, one)
    await memories.remember(db.pool, person, [said("I'm in a wheelchair", "fact")], EMBEDDER, two)
    await memories.remember(db.pool, person, [said("I'm travelling to Spain in June", "event")],
                            EMBEDDER, one)
    half_life = POLICY.half_life_days
    later = datetime.now(UTC) + timedelta(days=half_life)

    strongest = await memories.recall(db.pool, person, now=later)
    assert [m.text for m in strongest] == ["I'm in a wheelchair",
                                           "I'm travelling to Spain in June"]
    assert strongest[0].weight == pytest.approx(0.5 ** 0.5, abs=0.01)  # said twice
    assert strongest[1].weight == pytest.approx(0.5, abs=0.01)

    # three half-lives on, the travel plan said once is below the floor; the wheelchair
    # (said twice: half-life doubled) is not
    faded = await memories.recall(db.pool, person, now=datetime.now(UTC)
                                  + timedelta(days=3.5 * half_life))
    assert [m.text for m in faded] == ["I'm in a wheelchair"]
    assert await memories.search(db.pool, person, "holiday travel abroad", EMBEDDER,
                                 now=datetime.now(UTC) + timedelta(days=3.5 * half_life)) == []


async def test_search_finds_by_meaning_for_this_patient_only(db, workspace_id):
    ada, bob = await patient(db, workspace_id, "Ada"), await patient(db, workspace_id, "Bob")
    call = await a_call(db, workspace_id)
    await memories.remember(db.pool, ada, [
        said("I'm having knee surgery next month", "event"),
        said("I need a Spanish interpreter"),
        said("I prefer morning appointments")], EMBEDDER, call)
    await memories.remember(db.pool, bob, [said("I'm having hip surgery next week", "event")],
                            EMBEDDER, call)

    found = await memories.search(db.pool, ada, "any upcoming operation?", EMBEDDER)
    language = await memories.search(db.pool, ada, "what language do they speak", EMBEDDER)

    assert [m.text for m in found] == ["I'm having knee surgery next month"]
    assert language[0].text == "I need a Spanish interpreter"
    assert await memories.search(db.pool, ada, "the garden", EMBEDDER) == []
    assert await memories.search(db.pool, ada, "?!", EMBEDDER) == []


async def test_an_embedder_that_fails_stores_the_words_and_searches_by_them(db, workspace_id):
    person = await patient(db, workspace_id, "Eve")
    one, two = await a_call(db, workspace_id), await a_call(db, workspace_id)
    stored = await memories.remember(db.pool, person, [said("I planted tulips in the garden.",
                                                            "note")], BrokenEmbedder(), one)
    again = await memories.remember(db.pool, person, [said("I planted tulips in the garden",
                                                           "note")], BrokenEmbedder(), two)

    assert stored.embedded is False and len(stored.added) == 1
    assert again.reinforced == stored.added  # the same words: said again
    found = await memories.search(db.pool, person, "how are the gardens?", BrokenEmbedder())
    assert [m.text for m in found] == ["I planted tulips in the garden"]
    # with the embedder back, a memory with no vector is still found by its words
    assert [m.text for m in await memories.search(
        db.pool, person, "tulips", EMBEDDER)] == ["I planted tulips in the garden"]


async def test_recent_is_newest_first(db, workspace_id):
    person = await patient(db, workspace_id, "Flo")
    one, two = await a_call(db, workspace_id), await a_call(db, workspace_id)
    await memories.remember(db.pool, person, [said("I planted tulips in the garden.", "note")],
                            EMBEDDER, one)
    await memories.remember(db.pool, person, [said("My sister visits on Sunday.", "note")],
                            EMBEDDER, two)

    assert [m.text for m in await memories.recent(db.pool, person)] == [
        "My sister visits on Sunday.", "I planted tulips in the garden."]
