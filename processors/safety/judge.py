"""The second stage of the safety check: does the turn really say what the concept means?

Embeddings are near for "this wait is killing me" and "I want to kill myself"; a judge
tells them apart. Two backends, one answer (`Verdict`):

- `ModelJudge`: the fast model (Gemini Flash, else Claude Haiku), one structured question
  per candidate, bounded by a timeout; junk raises (no verdict).
- `RulesJudge`: offline, the concept's own confirm/reject patterns
  (data/safety_concepts.yaml): a literal, first-person statement confirms; an idiom that
  only shares the words does not.

A judge that is down gives no verdict, and then only the similarity threshold escalates:
safety never waits on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from lib.model_answers import parse_answer
from lib.prompts import render_prompt
from processors.safety.concepts import SafetyConcept, normalized

INSTRUCTION = "You check a safety concern in a phone call transcript. Answer with JSON only."
MAX_TOKENS = 120
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["confirmed", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Verdict:
    confirmed: bool
    reason: str
    judge: str  # which backend decided


class SafetyJudge(Protocol):
    name: str

    async def judge(self, text: str, concept: SafetyConcept) -> Verdict: ...


# Why the offline judge decided as it did (the escalation record's reason).
IDIOM = "an idiom, not a statement"
STATEMENT = "a literal statement of the concern"
NO_RULES = "no rules for this concept: near enough is confirmed"
NO_STATEMENT = "no statement of the concern"


class RulesJudge:
    name = "rules"

    async def judge(self, text: str, concept: SafetyConcept) -> Verdict:
        return judge_by_rules(text, concept)


def judge_by_rules(text: str, concept: SafetyConcept) -> Verdict:
    """A confirming phrase outside every rejected idiom confirms; an idiom alone does not;
    a concept without confirm patterns is confirmed by being near enough (unless the
    words are one of its idioms)."""
    text = normalized(text)
    rejected = [range(*m.span()) for m in concept.reject.finditer(text)] if (
        concept.reject is not None) else []
    if concept.confirm is None:
        return _verdict(False, IDIOM) if rejected else _verdict(True, NO_RULES)
    for phrase in concept.confirm.finditer(text):
        if not any(phrase.start() in idiom for idiom in rejected):
            return _verdict(True, STATEMENT)
    return _verdict(False, IDIOM if rejected else NO_STATEMENT)


def _verdict(confirmed: bool, reason: str) -> Verdict:
    return Verdict(confirmed, reason, RulesJudge.name)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    confirmed: bool
    reason: str = Field(default="", max_length=300)


# The model judge is tested against fake providers (tests/services); the mutation run
# covers the offline rules only.
class ModelJudge:  # pragma: no mutate block
    name = "model"

    def __init__(self, ask, *, timeout_s: float) -> None:
        """`ask`: pipeline.providers.structured_model(...) with `JUDGE_SCHEMA`."""
        self._ask = ask
        self._timeout_s = timeout_s

    async def judge(self, text: str, concept: SafetyConcept) -> Verdict:
        prompt = render_prompt("safety/judge.md", concept=concept.name,
                               description=concept.description, text=text.replace('"', "'"))
        raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
        answer = parse_answer(raw, _Answer, "judge answer does not fit")
        return Verdict(answer.confirmed, answer.reason, "model")
