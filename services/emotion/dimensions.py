"""Emotion labels → (valence, arousal), from the shipped, sourced table.

`data/emotion_dimensions.yaml` holds the Glasgow Norms means (CC BY 4.0) for all 53
labels the providers emit, with its provenance; it is checked when loaded: every label
of the prosody (48) and language (53) sets present, values on the 1–9 scale. Names are
matched case-insensitively (Hume's current API says `surprise (positive)`); a name we do
not know carries no valence or arousal, and is counted, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

DATA_FILE = Path(__file__).resolve().parent / "data" / "emotion_dimensions.yaml"
LABEL_COUNT = 53
LANGUAGE_ONLY_COUNT = 5
BURST_TYPE_COUNT = 67


class _LabelData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry: str | None
    V: float = Field(ge=1, le=9)
    A: float = Field(ge=1, le=9)
    note: str | None = None
    why: str | None = None
    arousal_override: float | None = Field(default=None, ge=1, le=9)

    @model_validator(mode="after")
    def _hand_values_say_why(self) -> _LabelData:
        if self.entry is None and not self.why:
            raise ValueError("a label without a Glasgow entry must say why its values were chosen")
        return self


class _BurstTypes(BaseModel):
    calls: list[str]
    sounds: list[str]


class _DimensionsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, _LabelData]
    language_only: list[str]
    burst_types: _BurstTypes

    @model_validator(mode="after")
    def _complete(self) -> _DimensionsFile:
        problems = []
        if len(self.labels) != LABEL_COUNT:
            problems.append(f"{len(self.labels)} labels, expected {LABEL_COUNT}")
        unknown = sorted(set(self.language_only) - set(self.labels))
        if unknown or len(self.language_only) != LANGUAGE_ONLY_COUNT:
            problems.append(f"language_only must be {LANGUAGE_ONLY_COUNT} known labels: {unknown}")
        bursts = self.burst_types.calls + self.burst_types.sounds
        if len(set(bursts)) != BURST_TYPE_COUNT:
            problems.append(f"{len(set(bursts))} burst types, expected {BURST_TYPE_COUNT}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class Dimensions:
    valence: float  # -1 (unpleasant) .. 1 (pleasant)
    arousal: float  # 0 (deactivated) .. 1 (activated)


@dataclass(frozen=True)
class EmotionTable:
    dimensions: dict[str, Dimensions]  # canonical label → point
    canonical: dict[str, str]  # lower-case name → canonical label
    language_only: frozenset[str]
    burst_types: dict[str, str]  # lower-case → canonical burst type

    @property
    def prosody_labels(self) -> frozenset[str]:
        return frozenset(self.dimensions) - self.language_only

    def label(self, name: str) -> str | None:
        return self.canonical.get(name.strip().lower())

    def burst(self, name: str) -> str | None:
        return self.burst_types.get(name.strip().lower())


def load_table(path: Path = DATA_FILE) -> EmotionTable:
    data = _DimensionsFile.model_validate(yaml.safe_load(path.read_text()))
    points = {
        name: Dimensions(
            valence=round((item.V - 5) / 4, 4),
            arousal=round(((item.arousal_override or item.A) - 1) / 8, 4),
        )
        for name, item in data.labels.items()
    }
    bursts = data.burst_types.calls + data.burst_types.sounds
    return EmotionTable(
        dimensions=points,
        canonical={name.lower(): name for name in points},
        language_only=frozenset(data.language_only),
        burst_types={name.lower(): name for name in bursts},
    )


@lru_cache(maxsize=1)
def emotion_table() -> EmotionTable:
    return load_table()


@dataclass(frozen=True)
class Point:
    """Where one set of label scores sits: the score-weighted mean of its labels."""

    valence: float
    arousal: float
    weight: float  # the summed scores of the labels it is made of
    unknown: int = 0  # scored names the table does not know (ignored)


def point_of(scores: Mapping[str, float], table: EmotionTable | None = None) -> Point | None:
    """None when no known label has a positive score."""
    table = table or emotion_table()
    total = valence = arousal = 0.0
    unknown = 0
    for name, score in scores.items():
        label = table.label(name)
        if label is None:
            unknown += 1
            continue
        if score <= 0:
            continue
        dims = table.dimensions[label]
        total += score
        valence += score * dims.valence
        arousal += score * dims.arousal
    if total <= 0:
        return None
    return Point(valence / total, arousal / total, total, unknown)
