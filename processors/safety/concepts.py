"""Safety concepts and the first stage of the safety check: how close a caller's turn is
to each concept.

A concept is described by example utterances; its embeddings are computed once per
embedder model (the defaults at start-up, a workspace's own concepts when they are
created) and a turn's similarity to the concept is its best cosine similarity to any
example. `assess` sorts the concepts a turn comes near into escalations (at or above the
escalation threshold: no judge needed) and candidates (for the judge). A concept whose
confirm patterns are specific enough (`confirm_makes_candidate`) also makes a turn that
states it in so many words a candidate, however far its embedding is: the judge still
decides, but a paraphrase the embedder places far away is not lost before it is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from language.patterns import valid_regex

DATA_FILE = Path(__file__).resolve().parent / "data" / "safety_concepts.yaml"

Severity = Literal["hard", "soft"]


class ConceptSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1, max_length=80)
    severity: Severity
    crisis: bool = False
    description: str = Field(min_length=1, max_length=300)
    examples: list[str] = Field(min_length=1, max_length=50)
    confirm: list[str] = Field(default_factory=list)
    reject: list[str] = Field(default_factory=list)
    confirm_makes_candidate: bool = False

    @field_validator("confirm", "reject")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return [valid_regex(pattern) for pattern in patterns]

    @model_validator(mode="after")
    def _candidate_needs_confirm(self) -> ConceptSpec:
        if self.confirm_makes_candidate and not self.confirm:
            raise ValueError(f"{self.key}: confirm_makes_candidate needs confirm patterns")
        return self


class ConceptFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    concepts: list[ConceptSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ConceptFile:
        keys = [c.key for c in self.concepts]
        if len(set(keys)) != len(keys):
            raise ValueError("safety concept keys must be unique")
        return self


@dataclass(frozen=True)
class SafetyConcept:
    key: str
    name: str
    severity: Severity
    crisis: bool
    description: str
    examples: tuple[str, ...]
    confirm: re.Pattern[str] | None = None
    reject: re.Pattern[str] | None = None
    workspace_id: str | None = None  # None: a default, always active
    confirm_makes_candidate: bool = False

    def stated_in(self, text: str) -> bool:
        """The turn states this concept in so many words (a candidate on its own)."""
        return (self.confirm_makes_candidate and self.confirm is not None
                and self.confirm.search(normalized(text)) is not None)

    @classmethod
    def from_spec(cls, spec: ConceptSpec, workspace_id: str | None = None) -> SafetyConcept:
        def joined(patterns: list[str]) -> re.Pattern[str] | None:
            if not patterns:
                return None
            return re.compile(r"\b(?:" + "|".join(f"(?:{p})" for p in patterns) + r")",
                              re.IGNORECASE)

        return cls(spec.key, spec.name, spec.severity, spec.crisis, spec.description,
                   tuple(spec.examples), joined(spec.confirm), joined(spec.reject),
                   workspace_id, spec.confirm_makes_candidate)


def normalized(text: str) -> str:
    """The turn as the concepts' patterns read it (typographic apostrophes made plain)."""
    return text.replace("\u2019", "'")


def load_concepts(path: Path = DATA_FILE) -> list[SafetyConcept]:
    spec = ConceptFile.model_validate(yaml.safe_load(path.read_bytes()))
    return [SafetyConcept.from_spec(c) for c in spec.concepts]


@lru_cache(maxsize=1)
def default_concepts() -> tuple[SafetyConcept, ...]:
    return tuple(load_concepts())


@dataclass(frozen=True)
class Nearness:
    concept: SafetyConcept
    similarity: float


@dataclass(frozen=True)
class Assessment:
    """Stage 1 for one turn: what to escalate now, what to ask the judge about."""

    escalate: tuple[Nearness, ...] = ()
    candidates: tuple[Nearness, ...] = ()
    best: Nearness | None = None


@dataclass
class ConceptIndex:
    """Concepts with their example embeddings for one embedder model."""

    model: str
    dimension: int
    concepts: list[SafetyConcept] = field(default_factory=list)
    _matrices: list[np.ndarray] = field(default_factory=list)

    def add(self, concept: SafetyConcept, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise ValueError(f"{concept.key}: embeddings of shape {vectors.shape}, "
                             f"expected (n, {self.dimension}) for {self.model}")
        self.concepts.append(concept)
        self._matrices.append(vectors)

    def with_concepts(self, extra: list[tuple[SafetyConcept, np.ndarray]]) -> ConceptIndex:
        """This index plus a workspace's own concepts (the defaults always stay)."""
        index = ConceptIndex(self.model, self.dimension, list(self.concepts),
                             list(self._matrices))
        for concept, vectors in extra:
            index.add(concept, vectors)
        return index

    def assess(self, vector: np.ndarray, *, escalate_at: float, candidate_at: float,
               text: str = "") -> Assessment:
        """`text`: the turn's words, for the concepts a turn can state in so many words."""
        near = [Nearness(c, float(np.max(m @ vector)))
                for c, m in zip(self.concepts, self._matrices)]
        near.sort(key=lambda n: n.similarity, reverse=True)
        return Assessment(
            escalate=tuple(n for n in near if n.similarity >= escalate_at),
            candidates=tuple(n for n in near if n.similarity < escalate_at and (
                n.similarity >= candidate_at or n.concept.stated_in(text))),
            best=near[0] if near else None,
        )
