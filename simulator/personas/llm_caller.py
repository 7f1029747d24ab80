"""A persona played by a fast model when a key is set, with the rules as its floor.

Every line is first worked out by the rules (instant, and it keeps track of the tasks);
the model is then asked, within a bounded time, to say it the way this person would.
A slow, failing or malformed answer falls back to the rules' line, so a call never
waits on the model or goes quiet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from loguru import logger
from pydantic import BaseModel, Field

from config import Settings
from lib.model_answers import parse_answer
from lib.prompts import render_prompt
from simulator.personas.caller import RuleCaller
from simulator.personas.model import Persona
from simulator.personas.spoken import say_date_of_birth, say_phone

LLM_TIMEOUT_S = 8.0
MAX_TOKENS = 200
TRANSCRIPT_TURNS = 12
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"say": {"type": "string"}, "hang_up": {"type": "boolean"}},
    "required": ["say", "hang_up"],
}
INSTRUCTION = "You play a phone caller in a test of a clinic's voice assistant. Reply in JSON."
HABIT_WORDS = {
    "front_loads": "you say your name, date of birth and what you want all in your first sentence",
    "corrects_self": "you sometimes get a detail wrong and correct yourself right after",
    "vague": "you are vague about times ('whenever', 'end of the week') until pressed",
    "interrupts": "you tend to talk over the assistant",
    "changes_mind": "you change your mind when a time is read back to you",
    "spells_name": "you spell your last name letter by letter",
    "dob_as_numbers": "you say your date of birth as bare numbers: month, day, two-digit year",
    "rambling": "you are elderly and chatty, with asides",
    "terse": "you use as few words as possible",
    "over_answers": "you volunteer the next detail before you are asked",
    "hangs_up_early": "you are impatient and may hang up",
}

Ask = Callable[[str], Awaitable[str]]


class CallerAnswer(BaseModel):
    say: str = Field(min_length=1, max_length=600)
    hang_up: bool = False


class LlmCaller:
    """`respond` as RuleCaller's, said by a model; `fallbacks` counts lines the rules said."""

    def __init__(self, persona: Persona, ask: Ask, *, timeout_s: float = LLM_TIMEOUT_S,
                 rules: RuleCaller | None = None) -> None:
        self.persona = persona
        self.rules = rules or RuleCaller(persona)
        self._ask = ask
        self._timeout_s = timeout_s
        self._transcript: list[str] = []
        self._hung_up = False
        self.fallbacks = 0

    @property
    def finished(self) -> bool:
        return self._hung_up or self.rules.finished

    async def respond(self, heard: list[str], *, interrupting: bool = False) -> str | None:
        self._transcript += [f"Assistant: {text}" for text in heard]
        suggestion = self.rules.respond(heard, interrupting=interrupting)
        if suggestion is None:
            return None
        try:
            answer = parse_answer(
                await asyncio.wait_for(self._ask(self._prompt(suggestion)), self._timeout_s),
                CallerAnswer, "persona caller")
        except Exception as error:  # noqa: BLE001 - any model failure: the rules' line
            self.fallbacks += 1
            logger.warning(f"persona {self.persona.name}: model caller fell back to the rules "
                           f"({type(error).__name__})")
            line = suggestion
        else:
            line, self._hung_up = answer.say.strip(), answer.hang_up
        self._transcript.append(f"Caller: {line}")
        return line

    def _prompt(self, suggestion: str) -> str:
        persona, facts = self.persona, self.persona.caller
        described = [
            f"Name: {facts.full_name}",
            f"Date of birth: {say_date_of_birth(facts.date_of_birth, 'long')}",
            f"Phone: {say_phone(persona.own_phone)}",
            "You are new to this clinic." if facts.new else "You are a patient of this clinic.",
        ]
        if persona.goal is not None and persona.goal.kind == "wrong_person":
            described[-1] = "You are not the person the clinic is calling for."
        if persona.description:
            described.append(persona.description)
        tasks = []
        for number, task in enumerate(persona.tasks, 1):
            details = {k: v for k, v in task.model_dump(exclude_defaults=True).items()
                       if k not in ("kind", "say_at")}
            tasks.append(f"{number}. {task.kind}" + (f": {details}" if details else ""))
        habits = "; ".join(HABIT_WORDS[h] for h in persona.habits) or "plainly and politely"
        return render_prompt(
            "personas/callee.md" if persona.outbound else "personas/caller.md",
            facts="\n".join(described), tasks="\n".join(tasks),
            habits=habits, transcript="\n".join(self._transcript[-TRANSCRIPT_TURNS:]) or "(none)",
            suggestion=suggestion)


def build_model_caller(persona: Persona, settings: Settings) -> LlmCaller | None:
    """The model-played caller when GOOGLE_API_KEY or ANTHROPIC_API_KEY is set, else None."""
    from pipeline.provider_choice import fast_model_choice
    from pipeline.providers import build_fast_llm, structured_model

    choice = fast_model_choice("persona_caller", "auto", settings, offline="rules")
    if choice.provider == "rules":
        return None
    service = build_fast_llm(choice.provider, settings)
    if service is None:
        return None
    ask = structured_model(service, instruction=INSTRUCTION, schema=ANSWER_SCHEMA,
                           max_tokens=MAX_TOKENS)
    return LlmCaller(persona, ask)
