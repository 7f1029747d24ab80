"""The summary's vocabulary (data/call_summary.yaml), validated once at load."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from language.phrases import phrase_pattern

RULES_FILE = Path(__file__).resolve().parent / "data" / "call_summary.yaml"
Task = str  # book, reschedule, cancel, confirm, query, question, person, record


class Want(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Task
    text: str = Field(min_length=1)
    recap: str = Field(min_length=1)


class WriteRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    task: Task
    recap: str = Field(min_length=1)


class EventRule(BaseModel):
    """A call event as something done (`done`, `recap`) and/or left for a person (`left`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str | None = None
    task: Task | None = None
    done: str | None = None
    recap: str | None = None
    left: str | None = None


class SummaryRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    wants: dict[str, Want]
    exits: dict[str, str]
    restated_exits: list[str] = Field(default_factory=list)
    writes: dict[str, WriteRule]
    events: dict[str, EventRule]
    tools: dict[str, EventRule]
    dissatisfied: list[str] = Field(min_length=1)
    restating: list[str] = Field(min_length=1)
    health: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _exits_name_wants(self) -> SummaryRules:
        unknown = sorted(set(self.exits.values()) - set(self.wants))
        if unknown:
            raise ValueError(f"exits name wants that are not defined: {unknown}")
        return self

    def dissatisfied_pattern(self) -> re.Pattern[str]:
        return phrase_pattern(self.dissatisfied)

    def health_pattern(self) -> re.Pattern[str]:
        return phrase_pattern(self.health)


@lru_cache(maxsize=1)
def summary_rules(path: Path = RULES_FILE) -> SummaryRules:
    return SummaryRules.model_validate(yaml.safe_load(path.read_text()))


@lru_cache(maxsize=1)
def dissatisfied_pattern() -> re.Pattern[str]:
    return summary_rules().dissatisfied_pattern()


@lru_cache(maxsize=1)
def health_pattern() -> re.Pattern[str]:
    return summary_rules().health_pattern()


@lru_cache(maxsize=1)
def restating_pattern() -> re.Pattern[str]:
    return phrase_pattern(summary_rules().restating)
