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

from services.model_answers import parse_answer
from services.prompts import render_prompt
from services.safety.concepts import SafetyConcept, normalized

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


class RulesJudge:
    name = "rules"

    async def judge(self, text: str, concept: SafetyConcept) -> Verdict:
        return judge_by_rules(text, concept)


def judge_by_rules(text: str, concept: SafetyConcept) -> Verdict:
    text = normalized(text)
    if concept.reject is not None and concept.reject.search(text) and not (
            concept.confirm is not None and _confirmed_outside_reject(text, concept)):
        return Verdict(False, "an idiom, not a statement", "rules")
    if concept.confirm is not None and concept.confirm.search(text):
        return Verdict(True, "a literal statement of the concern", "rules")
    if concept.confirm is None:
        return Verdict(True, "no rules for this concept: near enough is confirmed", "rules")
    return Verdict(False, "no statement of the concern", "rules")


def _confirmed_outside_reject(text: str, concept: SafetyConcept) -> bool:
    """A confirming phrase that is not itself part of a rejected idiom."""
    assert concept.confirm is not None and concept.reject is not None
    rejected = [m.span() for m in concept.reject.finditer(text)]
    return any(not any(a <= m.start() < b for a, b in rejected)
               for m in concept.confirm.finditer(text))


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    confirmed: bool
    reason: str = Field(default="", max_length=300)


class ModelJudge:
    name = "model"

    def __init__(self, ask, *, timeout_s: float) -> None:
        """`ask`: services.providers.structured_model(...) with `JUDGE_SCHEMA`."""
        self._ask = ask
        self._timeout_s = timeout_s

    async def judge(self, text: str, concept: SafetyConcept) -> Verdict:
        prompt = render_prompt("safety/judge.md", concept=concept.name,
                               description=concept.description, text=text.replace('"', "'"))
        raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
        answer = parse_answer(raw, _Answer, "judge answer does not fit")
        return Verdict(answer.confirmed, answer.reason, "model")
