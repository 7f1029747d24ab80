"""A model-played persona: the model's words when it answers in time, the rules' otherwise."""

import asyncio

from pydantic import SecretStr

from config import Settings
from simulator.personas.llm_caller import LlmCaller, build_model_caller
from simulator.personas.model import Persona
from tests.personas.test_caller import GREETING, persona


def model_saying(answer: str, delay_s: float = 0.0):
    prompts: list[str] = []

    async def ask(prompt: str) -> str:
        prompts.append(prompt)
        await asyncio.sleep(delay_s)
        return answer

    return ask, prompts


async def test_the_model_says_the_line_and_sees_the_persona_the_call_and_the_rules_line():
    ask, prompts = model_saying('{"say": "Hiya, I\'m after a blood test this week.", '
                                '"hang_up": false}')
    caller = LlmCaller(persona(), ask)

    line = await caller.respond([GREETING])

    assert line == "Hiya, I'm after a blood test this week."
    assert "Alex Reid" in prompts[0] and "book" in prompts[0]
    assert f"Assistant: {GREETING}" in prompts[0]
    assert caller.rules.progress.lines == 1 and caller.fallbacks == 0


async def test_a_slow_or_malformed_model_answer_falls_back_to_the_rules_line():
    slow, _ = model_saying('{"say": "late", "hang_up": false}', delay_s=1.0)
    garbled, _ = model_saying("I'd like a blood test")  # not JSON

    for ask in (slow, garbled):
        caller = LlmCaller(persona(), ask, timeout_s=0.05)
        line = await caller.respond([GREETING])

        assert "blood test" in line.lower() and line != "late"
        assert caller.fallbacks == 1


async def test_the_model_may_end_the_call():
    ask, _ = model_saying('{"say": "Okay, bye then.", "hang_up": true}')
    caller = LlmCaller(persona(), ask)

    await caller.respond([GREETING])

    assert caller.finished


def test_without_a_key_there_is_no_model_caller(tmp_path):
    assert build_model_caller(persona(), Settings(_env_file=None, data_dir=tmp_path)) is None
    keyed = Settings(_env_file=None, data_dir=tmp_path, google_api_key=SecretStr("k"))
    assert build_model_caller(persona(), keyed) is not None


async def test_a_model_played_callee_is_told_the_clinic_is_calling_them():
    callee = Persona.model_validate({
        "name": "callee", "direction": "outbound", "to": "+15550100201",
        "caller": {"first_name": "Margaret", "last_name": "Chen", "date_of_birth": "1948-03-14"},
        "tasks": [{"kind": "confirm_reminder"}], "expect": {"outcome": "confirmed"},
    })
    ask, prompts = model_saying('{"say": "Yes, it\'s me.", "hang_up": false}')
    caller = LlmCaller(callee, ask)

    line = await caller.respond(["Hello, this is Demo Family Clinic. May I speak with Margaret?"])

    assert line == "Yes, it's me."
    assert "a medical clinic's voice assistant is\ncalling them" in prompts[0]
    assert "confirm_reminder" in prompts[0] and "555 010 0201" in prompts[0]
