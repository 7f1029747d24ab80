"""Cloud emotion in words: the fast model scores each final transcript (53 emotions,
9-level sentiment, 6 toxicity categories).

Hume's current Expression Measurement API has no language model (the legacy one was
switched off in June 2026), so the fast LLM — Gemini Flash, else Claude Haiku — does
this job: one structured request per final transcript, the schema enforced by the
provider where it can be and validated here always, bounded by a timeout. An answer
that does not fit (not JSON, a sentiment that is not 9 levels, a score out of range)
raises, which the tap's circuit breaker counts as a failure; a label outside the 53 is
dropped and counted, never guessed.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lib.model_answers import parse_answer
from lib.prompts import render_prompt
from services.emotion.dimensions import emotion_table
from services.emotion.reading import TOXICITY_CATEGORIES, EmotionReading, Source

INSTRUCTION = "You rate emotion in short phone transcripts. Answer with JSON only."
MAX_TOKENS = 300
MAX_EMOTIONS = 5
MIN_SCORE = 0.1  # weaker labels say nothing the rest does not
SENTIMENT_LEVELS = 9


def language_schema() -> dict:
    """What the provider is asked to enforce (strict form: all required, nothing extra)."""
    labels = sorted(emotion_table().dimensions)
    score = {"type": "number"}
    return {
        "type": "object",
        "properties": {
            "emotions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": labels}, "score": score},
                    "required": ["name", "score"],
                    "additionalProperties": False,
                },
            },
            "sentiment": {"type": "array", "items": score},
            "toxicity": {
                "type": "object",
                "properties": {name: score for name in TOXICITY_CATEGORIES},
                "required": list(TOXICITY_CATEGORIES),
                "additionalProperties": False,
            },
        },
        "required": ["emotions", "sentiment", "toxicity"],
        "additionalProperties": False,
    }


class _Scored(BaseModel):
    name: str
    score: float = Field(ge=0, le=1)


class LanguageScores(BaseModel):
    """The model's answer, checked."""

    model_config = ConfigDict(extra="ignore")

    emotions: list[_Scored]
    sentiment: list[float]
    toxicity: dict[str, float]

    @field_validator("sentiment")
    @classmethod
    def _nine_levels(cls, value: list[float]) -> list[float]:
        if len(value) != SENTIMENT_LEVELS or any(p < 0 for p in value) or sum(value) <= 0:
            raise ValueError(f"sentiment must be {SENTIMENT_LEVELS} non-negative probabilities")
        total = sum(value)
        return [round(p / total, 4) for p in value]

    @field_validator("toxicity")
    @classmethod
    def _six_categories(cls, value: dict[str, float]) -> dict[str, float]:
        if set(value) != set(TOXICITY_CATEGORIES) or any(not 0 <= v <= 1 for v in value.values()):
            raise ValueError(f"toxicity must score exactly {list(TOXICITY_CATEGORIES)} in 0..1")
        return value


def parse_language_scores(raw: str) -> LanguageScores:
    """The model's answer (code fences tolerated); ValueError when it does not fit.

    The error names what was wrong, never the answer's text: a model may echo the
    caller's words, and this reason reaches the logs."""
    return parse_answer(raw, LanguageScores, "not language emotion scores")


def reading_from(scores: LanguageScores, at: float) -> EmotionReading:
    """The top labels (canonical names; unknown ones kept for the state to count)."""
    table = emotion_table()
    kept: dict[str, float] = {}
    for item in sorted(scores.emotions, key=lambda e: -e.score)[:MAX_EMOTIONS]:
        if item.score < MIN_SCORE:
            continue
        name = table.label(item.name) or item.name
        kept[name] = max(item.score, kept.get(name, 0.0))
    return EmotionReading(
        Source.LANGUAGE, kept, at, provider="llm",
        sentiment=tuple(scores.sentiment), toxicity=dict(scores.toxicity),
    )


class LLMTextProvider:
    """The fast model as the language emotion provider (one per process: it holds no
    per-call state)."""

    name = "llm"

    def __init__(self, ask, *, timeout_s: float) -> None:
        """`ask`: pipeline.providers.structured_model(...) with `language_schema()`."""
        self._ask = ask
        self._timeout_s = timeout_s
        self._labels = ", ".join(sorted(emotion_table().dimensions))

    async def analyze(self, text: str, *, at: float) -> list[EmotionReading]:
        if not text.strip():
            return []
        prompt = render_prompt("emotion/language.md", text=text.replace('"', "'"),
                               labels=self._labels)
        raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
        return [reading_from(parse_language_scores(raw), at)]
