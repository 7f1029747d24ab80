"""What the director does when a call reaches its time limit, as plain rules.

The context graph names a policy (`time_limit` in its YAML): `escalate`, `offer_callback`
or `end`. A long clinic call is usually one that is stuck or hard, not one to cut off, so
the policy is a starting point and the call's situation can only make it more careful:

- a call that raised a safety escalation is never ended or offered a call back: it is
  escalated to a person (put through when a transfer number is set);
- `escalate` puts the caller through when a transfer number is set, else asks the team
  to take over while the agent keeps helping;
- `offer_callback` asks the caller whether they would like a call back; how they answer
  is read with the phrases of `data/time_limit.yaml` and the yes/no lists. A call that
  cannot arrange one (no database or workspace) is escalated instead: a call back is
  never offered that could not be made.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from language.affirmation import Answer, classify_answer
from language.phrases import normalize, phrase_pattern

DATA_FILE = Path(__file__).resolve().parent / "data" / "time_limit.yaml"

# What a call does at the director's time limit, as its context graph names it.
TimeLimitPolicy = Literal["escalate", "offer_callback", "end"]
DEFAULT_TIME_LIMIT: TimeLimitPolicy = "escalate"
TimeLimitStep = Literal["end", "escalate", "transfer", "offer_callback"]
OfferAnswer = Literal["accepted", "declined", "not_answered"]

# The operator queue's name for an escalation made by the time limit.
TIME_LIMIT_CONCEPT = "call_time_limit"


def time_limit_step(policy: str, *, escalated: bool, can_transfer: bool,
                    can_call_back: bool = True) -> TimeLimitStep:
    """What to do now: the policy, made more careful by what happened in the call."""
    if policy == "end" and not escalated:
        return "end"
    if policy == "offer_callback" and not escalated and can_call_back:
        return "offer_callback"
    return "transfer" if can_transfer else "escalate"


class OfferPhrases(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    short_answer_words: int = Field(ge=1, le=10)
    call_back: list[str]
    carry_on: list[str]

    @field_validator("call_back", "carry_on")
    @classmethod
    def _non_empty(cls, phrases: list[str]) -> list[str]:
        cleaned = [normalize(p) for p in phrases if p and p.strip()]
        if not cleaned:
            raise ValueError("phrase list must not be empty")
        return cleaned


class OfferAnswers:
    """Reads a reply to the call-back offer."""

    def __init__(self, phrases: OfferPhrases) -> None:
        self._short = phrases.short_answer_words
        self._call_back: re.Pattern[str] = phrase_pattern(phrases.call_back)
        self._carry_on: re.Pattern[str] = phrase_pattern(phrases.carry_on)

    def answer(self, caller_text: str) -> OfferAnswer:
        text = normalize(caller_text)
        said = classify_answer(text)
        if self._carry_on.search(text):
            return "declined"
        if self._call_back.search(text):
            return "declined" if said is Answer.NO else "accepted"
        if len(text.split()) <= self._short:
            if said is Answer.YES:
                return "accepted"
            if said is Answer.NO:
                return "declined"
        return "not_answered"


@lru_cache(maxsize=1)
def offer_answers(path: Path = DATA_FILE) -> OfferAnswers:
    """The bundled phrases, validated and compiled once."""
    return OfferAnswers(OfferPhrases.model_validate(yaml.safe_load(path.read_text("utf-8"))))
