"""The fast model's analysis over the rules: its reading of the words is kept, what was
done stays the record's, and a model that times out or answers junk leaves the rules'
analysis, marked with why."""

import asyncio
import json

from analysis.analyst import ModelAnalyst, RulesAnalyst
from tests.analysis.records import booked, conversation, record

TURNS = conversation(
    "agent: How can I help?",
    "caller: I'd like to book physio, I'm on oh them pick and worried about my knee",
    "agent: I have Tuesday at 10 AM. Shall I book it?",
    "caller: yes",
    "agent: Booked.")
CALL = record(TURNS, writes=[booked(3)])


def answer(**change) -> str:
    score = {"score": 4, "reason": "Booked as asked.", "turns": [3, 99]}
    body = {
        "wanted": [{"text": "Physiotherapy for a sore knee", "turns": [1]}],
        "left_for_person": [{"text": "Check the knee before the visit", "turns": [1]}],
        "concerns": [{"kind": "health", "text": "Knee pain", "turns": [1]}],
        "quality": dict.fromkeys(["task_completion", "information_accuracy",
                                  "conversation_flow", "error_recovery",
                                  "caller_experience"], score),
        "stt_suggestions": [{"said": "Ozempic", "heard": "oh them pick", "turn": 1}],
    }
    body.update(change)
    return json.dumps(body)


def analyst(reply, *, timeout_s: float = 1.0) -> ModelAnalyst:
    async def ask(prompt: str) -> str:
        if isinstance(reply, Exception):
            raise reply
        if reply == "hang":
            await asyncio.sleep(5)
        return reply

    return ModelAnalyst(ask, provider="google", timeout_s=timeout_s)


async def test_the_models_reading_is_kept_and_what_was_done_stays_the_records():
    analysis = await analyst(answer()).analyse(CALL)

    assert analysis.analyst == "model:google" and analysis.fallback is None
    assert [d.kind for d in analysis.summary.done] == ["booked"]  # from the record
    assert "Check the knee before the visit" in [i.text for i in analysis.summary.left_for_person]
    assert analysis.quality.dimensions["task_completion"].score == 4
    assert analysis.quality.dimensions["task_completion"].turns == (3,)  # 99 is no turn
    assert [(m.term, m.heard, m.at_ms, m.source) for m in analysis.misheard] == [
        ("Ozempic", "oh them pick", TURNS[1].speech_start_ms, "model")]


async def test_junk_from_the_model_leaves_the_rules_analysis_marked():
    rules = await RulesAnalyst().analyse(CALL)
    for junk in ("I think the call went fine!", answer(quality={"task_completion": 9}),
                 '{"wanted": []}', ""):
        analysis = await analyst(junk).analyse(CALL)

        assert analysis.analyst == "rules"
        assert analysis.fallback and "does not fit" in analysis.fallback
        assert analysis.quality == rules.quality and analysis.summary == rules.summary


async def test_a_model_that_does_not_answer_in_time_leaves_the_rules_analysis():
    analysis = await analyst("hang", timeout_s=0.05).analyse(CALL)

    assert (analysis.analyst, analysis.fallback) == ("rules", "timed out")


async def test_a_model_that_fails_is_named_by_its_error_class_only():
    analysis = await analyst(ConnectionError("503 for caller +1 555 0100")).analyse(CALL)

    assert (analysis.analyst, analysis.fallback) == ("rules", "ConnectionError")


async def test_a_call_where_the_caller_said_nothing_is_not_sent_to_the_model():
    asked = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return answer()

    silent = record(conversation("agent: Thanks for calling. How can I help?"))
    analysis = await ModelAnalyst(ask, provider="google", timeout_s=1).analyse(silent)

    assert asked == [] and analysis.analyst == "rules"
