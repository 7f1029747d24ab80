"""The after-call analyst through Pipecat's real fast-model services, against local fakes
of Gemini's and Anthropic's APIs: the model's reading is kept; its junk or its silence
leaves the rules' analysis, marked; no key means the rules."""

from __future__ import annotations

import json

import pytest

from analysis.analyst import ModelAnalyst, RulesAnalyst
from config import Settings
from pipeline.providers import ProviderPlan, build_analyst, build_memory_extractor
from tests.analysis.records import booked, conversation, record
from tests.model_fakes import serve_anthropic, serve_gemini

pytestmark = pytest.mark.timeout(30)
CALL = record(conversation(
    "agent: How can I help?",
    "caller: I'd like to book physio for my knee, I take a pixie band",
    "agent: I have Tuesday at 10 AM. Shall I book it?",
    "caller: yes please",
    "agent: Booked."), writes=[booked(3)])
SCORE = {"score": 4, "reason": "Booked what the caller asked for.", "turns": [3]}
ANSWER = {
    "wanted": [{"text": "Physiotherapy for a knee", "turns": [1]}],
    "left_for_person": [], "concerns": [{"kind": "health", "text": "Knee pain", "turns": [1]}],
    "quality": dict.fromkeys(["task_completion", "information_accuracy", "conversation_flow",
                              "error_recovery", "caller_experience"], SCORE),
    "stt_suggestions": [{"said": "Apixaban", "heard": "a pixie band", "turn": 1}],
}


def analyst_for(**values) -> object:
    settings = Settings(_env_file=None, **values)
    return build_analyst(ProviderPlan.from_settings(settings), settings)


async def test_gemini_reads_the_call_and_its_answer_is_kept():
    async with serve_gemini([json.dumps(ANSWER)]) as (fake, base_url):
        analyst = analyst_for(google_api_key="g-test", google_base_url=base_url)
        analysis = await analyst.analyse(CALL)

    assert isinstance(analyst, ModelAnalyst) and analysis.analyst == "model:google"
    assert analysis.quality.dimensions["task_completion"].reason == SCORE["reason"]
    assert [m.term for m in analysis.misheard] == ["Apixaban"]
    body = fake.requests[0]["body"]
    prompt = body["contents"][-1]["parts"][0]["text"]
    assert "[1] caller: I'd like to book physio for my knee" in prompt
    assert "Booked: Physiotherapy" in prompt  # what the record says was done
    assert body["generationConfig"]["responseMimeType"] == "application/json"


async def test_claude_junk_then_silence_leave_the_rules_analysis_marked():
    async with serve_anthropic(["The call went well.", ("slow", 2.0, json.dumps(ANSWER))]
                               ) as (_fake, base_url):
        analyst = analyst_for(anthropic_api_key="a-test", anthropic_base_url=base_url,
                              analysis_timeout_s=0.5)
        junk = await analyst.analyse(CALL)
        silent = await analyst.analyse(CALL)

    assert (junk.analyst, silent.analyst) == ("rules", "rules")
    assert "not JSON" in junk.fallback and silent.fallback == "timed out"
    assert junk.quality == silent.quality == (await RulesAnalyst().analyse(CALL)).quality


def test_no_fast_model_key_means_the_rules():
    assert isinstance(analyst_for(), RulesAnalyst)


async def test_gemini_picks_memories_held_to_the_callers_own_words():
    said = {"memories": [
        {"turn": 1, "quote": "I take a pixie band", "kind": "fact"},
        {"turn": 1, "quote": "I am allergic to penicillin", "kind": "fact"},  # never said
        {"turn": 2, "quote": "I have Tuesday at 10 AM", "kind": "fact"}]}  # the agent's words
    async with serve_gemini([json.dumps(said), "{not json"]) as (_fake, base_url):
        settings = Settings(_env_file=None, google_api_key="g", google_base_url=base_url)
        extractor = build_memory_extractor(ProviderPlan.from_settings(settings), settings)
        picked = await extractor.extract(CALL)
        fallen_back = await extractor.extract(CALL)

    assert [(m.text, m.turn_seq) for m in picked] == [("I take a pixie band", 1)]
    assert picked.analyst == "model:google"
    assert fallen_back.analyst == "rules" and fallen_back.fallback == "ValueError"
