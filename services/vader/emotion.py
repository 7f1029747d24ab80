"""Offline emotion in words: VADER for valence, phrase rules for which emotion.

Per final transcript: VADER's compound score (−1..1) is the valence; a label is scored
when the words name it (`data/text_rules.yaml`), more strongly the more intense the
sentiment; when no rule names a feeling but the sentiment is clear (and the turn is more than a
word or two), its quadrant's plain label is used — distress, sadness, joy or
contentment, by valence and the words' intensity. Sarcasm cancels the praise it wraps.
Neutral words give no reading. Each reading carries VADER's compound on the 9-level
sentiment scale, and hostile phrases aimed at the agent (insults, obscenity, threats)
score their toxicity category; the rules claim no more than words can show.
Bursts written in the transcript ("haha", "ugh", "hmm") come out as burst readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, model_validator
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from language.phrases import normalize, phrase_pattern
from services.emotion.dimensions import emotion_table
from services.emotion.reading import TOXICITY_CATEGORIES, EmotionReading, Source

RULES_FILE = Path(__file__).resolve().parent / "data" / "text_rules.yaml"
CLEAR_SENTIMENT = 0.5
FALLBACK_MIN_WORDS = 3
# With no feeling named, clear sentiment still places the words in a quadrant.
QUADRANT_LABELS = {("negative", "high"): "Distress", ("negative", "low"): "Sadness",
                   ("positive", "high"): "Joy", ("positive", "low"): "Contentment"}
HIGH_INTENSITY = 0.6
RULE_BASE_SCORE = 0.55
BURST_SCORE = 0.7
TOXICITY_SCORE = 0.8


def sentiment_distribution(compound: float) -> tuple[float, ...]:
    """VADER's compound (-1..1) on the 9-level sentiment scale: a point estimate, split
    between the two nearest levels (level 1 is -1, 5 is 0, 9 is +1)."""
    position = 4 * max(-1.0, min(1.0, compound)) + 4  # 0..8
    low = min(7, int(position))
    upper = round(position - low, 4)
    levels = [0.0] * 9
    levels[low], levels[low + 1] = round(1 - upper, 4), upper
    return tuple(levels)


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, list[str]]
    bursts: dict[str, list[str]]
    toxicity: dict[str, list[str]]

    @model_validator(mode="after")
    def _known(self) -> _Rules:
        table = emotion_table()
        problems = [f"unknown label {name!r}" for name in self.labels if name not in table.dimensions]
        problems += [f"unknown burst {name!r}" for name in self.bursts if table.burst(name) != name]
        problems += [f"unknown toxicity category {name!r}" for name in self.toxicity
                     if name not in TOXICITY_CATEGORIES]
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class CompiledRules:
    labels: dict[str, re.Pattern[str]]
    bursts: dict[str, re.Pattern[str]]
    toxicity: dict[str, re.Pattern[str]]


@lru_cache(maxsize=1)
def text_rules(path: Path = RULES_FILE) -> CompiledRules:
    rules = _Rules.model_validate(yaml.safe_load(path.read_text()))
    return CompiledRules(
        labels={name: phrase_pattern(phrases) for name, phrases in rules.labels.items()},
        bursts={name: phrase_pattern(phrases) for name, phrases in rules.bursts.items()},
        toxicity={name: phrase_pattern(phrases) for name, phrases in rules.toxicity.items()},
    )


@lru_cache(maxsize=1)
def _vader() -> SentimentIntensityAnalyzer:
    return SentimentIntensityAnalyzer()


def intensity(text: str, compound: float) -> float:
    """How activated the words are (0..1): sentiment strength, exclamations, capitals."""
    shouting = sum(1 for w in text.split() if len(w) > 2 and w.isupper())
    return min(1.0, 0.35 + 0.4 * abs(compound) + 0.1 * text.count("!") + 0.1 * shouting)


class LocalTextAnalyzer:
    """The offline language provider."""

    name = "local"

    def analyze(self, text: str, *, at: float) -> list[EmotionReading]:
        """An emotion reading (if the words carry one) and a burst reading (if written)."""
        readings: list[EmotionReading] = []
        said = normalize(text)
        if not said:
            return readings
        rules = text_rules()
        bursts = {name: BURST_SCORE for name, pattern in rules.bursts.items()
                  if pattern.search(said)}
        if bursts:
            readings.append(EmotionReading(Source.BURST, bursts, at, provider=self.name))
        compound = _vader().polarity_scores(text)["compound"]
        named = {name: round(min(1.0, RULE_BASE_SCORE + 0.4 * abs(compound)), 4)
                 for name, pattern in rules.labels.items() if pattern.search(said)}
        if "Sarcasm" in named:  # "oh great": the praise is not meant
            table = emotion_table()
            named = {k: v for k, v in named.items() if table.dimensions[k].valence < 0}
        if (not named and abs(compound) >= CLEAR_SENTIMENT
                and len(said.split()) >= FALLBACK_MIN_WORDS):
            side = "positive" if compound > 0 else "negative"
            level = "high" if intensity(text, compound) >= HIGH_INTENSITY else "low"
            named = {QUADRANT_LABELS[side, level]: round(abs(compound), 4)}
        hostile = {name for name, pattern in rules.toxicity.items() if pattern.search(said)}
        if named or hostile:
            toxicity = {name: TOXICITY_SCORE if name in hostile else 0.0
                        for name in TOXICITY_CATEGORIES} if hostile else None
            readings.append(EmotionReading(
                Source.LANGUAGE, named, at, provider=self.name,
                sentiment=sentiment_distribution(compound), toxicity=toxicity,
            ))
        return readings


class LocalTextProvider:
    """VADER and phrase rules: well under a millisecond, so it runs inline."""

    name = "local"

    def __init__(self) -> None:
        self._analyzer = LocalTextAnalyzer()

    async def analyze(self, text: str, *, at: float) -> list[EmotionReading]:
        return self._analyzer.analyze(text, at=at)
