"""What a finished call leaves to remember: the caller's own words about themselves, each
from its turn, however they put it; never someone else's details, never the agent's; the
fast model held to the caller's words, and the rules when it fails."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from analysis.memories import RulesMemoryExtractor, memory_patterns
from config import Settings
from db.call_analyses import CallRecord, RecordedTurn
from pipeline.providers import ProviderPlan, build_memory_extractor
from tests.model_fakes import serve_anthropic

pytestmark = pytest.mark.timeout(20)
RULES = RulesMemoryExtractor()


def record(*caller_says: str, agent: str = "How can I help?") -> CallRecord:
    turns = []
    for said in caller_says:
        turns.append(RecordedTurn(len(turns), "agent", agent))
        turns.append(RecordedTurn(len(turns), "caller", said))
    return CallRecord(
        call_id="00000000-0000-0000-0000-000000000001", workspace_id="w", service_id=None,
        patient_id="p", direction="inbound", started_at=datetime.now(UTC), duration_s=60.0,
        completion_reason="caller_hung_up", final_state="closing", transcript_accuracy=None,
        verified_words=[], turns=turns, tools=[], events=[], escalations=[], writes=[])


def kinds(said: str) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in RULES.extract_now(record(said))]


@pytest.mark.parametrize(("said", "kind"), [
    # when they like to come in, put many ways
    ("Mornings are best for me, before work.", "preference"),
    ("I'd rather come in the afternoon if possible", "preference"),
    ("honestly early appointments suit me better", "preference"),
    ("I can only do Tuesdays or Thursdays", "preference"),
    ("weekends work best for me", "preference"),
    ("I'd like to keep seeing Dr. Patel", "preference"),
    ("I'd prefer a female physiotherapist", "preference"),
    ("the Northside clinic is closer for me", "preference"),
    ("please call my cell rather than the home number", "preference"),
    ("I prefer a text to a call", "preference"),
    # what they need, what they live with
    ("I use a wheelchair, so I need step-free access", "fact"),
    ("I don't drive any more so I'll need a ride", "fact"),
    ("I'll need a Spanish interpreter", "fact"),
    ("English isn't my first language", "fact"),
    ("I'm quite hard of hearing, sorry", "fact"),
    ("I've got arthritis in both hands", "fact"),
    ("my lower back has been hurting for three weeks", "fact"),
    ("I've twisted my ankle", "fact"),
    ("I'm pregnant, about five months", "fact"),
    # what is coming up in their life
    ("I'm having knee surgery on the 12th", "event"),
    ("I'll be travelling to Spain for most of June", "event"),
    ("we're moving house next month so I'm busy", "event"),
])
def test_the_caller_s_own_words_about_themselves_are_remembered_by_kind(said, kind):
    assert kinds(said) == [(kind, said[:1].upper() + said[1:])]


@pytest.mark.parametrize("said", [
    "My daughter prefers mornings",
    "my husband uses a wheelchair",
    "She can only do Tuesdays",
    "he's having knee surgery next week",
    "it's for my son, he has asthma",
    "Can I book a physio appointment?",
    "Yes, that time is fine",
    "What are your opening hours on Saturday?",
    "The weather has been lovely",
])
def test_someone_else_s_details_and_plain_requests_are_not(said):
    assert kinds(said) == []


def test_each_memory_is_linked_to_its_turn_and_agent_words_are_never_memories():
    call = record("Hi, I need to book a check-up.",
                  "Thanks. I can only do Fridays. Also I use a walking stick.",
                  agent="Mornings are best for most people; I prefer Tuesdays.")
    found = RULES.extract_now(call)

    assert [(m.turn_seq, m.kind, m.text) for m in found] == [
        (3, "preference", "I can only do Fridays."),
        (3, "fact", "Also I use a walking stick.")]
    assert all(m.source == "analysis" for m in found)


def test_the_patterns_are_checked_when_loaded(tmp_path: Path):
    bad = tmp_path / "patterns.yaml"
    bad.write_text("version: 1\nfirst_person: ['\\bi\\b']\nsomeone_else: ['\\bhe\\b']\n"
                   "rules: [{name: x, kind: wish, patterns: ['(unclosed']}]\n")
    with pytest.raises(ValidationError):
        memory_patterns.__wrapped__(bad)


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


async def test_the_fast_model_is_held_to_the_caller_s_words_and_falls_back_to_the_rules():
    call = record("I need a physio appointment.",
                  "Mornings suit me best. My son has asthma though.")
    picks = {"memories": [
        {"turn": 3, "quote": "Mornings suit me best", "kind": "preference"},
        {"turn": 3, "quote": "My son has asthma", "kind": "fact"},          # someone else
        {"turn": 1, "quote": "I have diabetes", "kind": "fact"},            # never said
        {"turn": 0, "quote": "How can I help?", "kind": "fact"}]}           # the agent's
    async with serve_anthropic([json.dumps(picks), "not json at all",
                                ("slow", 2.0, "{}")]) as (fake, base_url):
        values = {"anthropic_api_key": "a-test", "anthropic_base_url": base_url,
                  "memory_extraction_timeout_s": 0.5}
        extractor = build_memory_extractor(ProviderPlan.from_settings(settings(**values)),
                                           settings(**values))
        by_model = await extractor.extract(call)
        after_junk = await extractor.extract(call)
        after_silence = await extractor.extract(call)

    assert extractor.name == "model:anthropic"
    assert [(m.turn_seq, m.kind, m.text) for m in by_model] == [
        (3, "preference", "Mornings suit me best")]
    assert (by_model.analyst, by_model.fallback) == ("model:anthropic", None)
    assert [m.text for m in after_junk] == ["Mornings suit me best."]
    assert (after_junk.analyst, after_junk.fallback) == ("rules", "ValueError")
    assert after_silence.fallback == "timeout" and len(after_silence) == 1
    assert "[3] caller: Mornings suit me best." in fake.requests[0]["body"]["messages"][0][
        "content"]


def test_no_fast_model_means_the_rules():
    plan = ProviderPlan.from_settings(settings())
    assert build_memory_extractor(plan, settings()).name == "rules"
