"""Understands yes/no answers from a transcript, using the phrase lists in data/affirmation.yaml."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, field_validator

from language.phrases import normalize, phrase_pattern

DATA_FILE = Path(__file__).resolve().parent / "data" / "affirmation.yaml"


class Answer(StrEnum):
    YES = "yes"
    NO = "no"
    UNCLEAR = "unclear"


class AffirmationPhrases(BaseModel):
    uncertain: list[str]
    negative: list[str]
    positive: list[str]

    @field_validator("uncertain", "negative", "positive")
    @classmethod
    def _non_empty(cls, phrases: list[str]) -> list[str]:
        cleaned = [" ".join(p.lower().split()) for p in phrases if p and p.strip()]
        if not cleaned:
            raise ValueError("phrase list must not be empty")
        return cleaned


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    phrases = AffirmationPhrases.model_validate(yaml.safe_load(DATA_FILE.read_text()))
    return (
        phrase_pattern(phrases.uncertain),
        phrase_pattern(phrases.negative),
        phrase_pattern(phrases.positive),
    )


def classify_answer(transcript: str) -> Answer:
    """Classify a reply to a yes/no question: uncertainty, then negatives, win over yes."""
    text = normalize(transcript)
    uncertain, negative, positive = _patterns()
    if uncertain.search(text):
        return Answer.UNCLEAR
    if negative.search(text):
        return Answer.NO
    if positive.search(text):
        return Answer.YES
    return Answer.UNCLEAR
