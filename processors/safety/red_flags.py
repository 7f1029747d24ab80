"""Medical red flags in everyday words: symptoms that need emergency care now.

Callers rarely say "chest pain"; they say there is a weight on their chest, their arm
has gone funny, their face has dropped on one side. A flag fires on a phrase of its own,
or on two word groups close together ("pressure ... chest" within a few words), unless
a negation comes just before ("no chest pain"). The rules are data
(`data/red_flags.yaml`), validated at load; matching is plain regular expressions, a few
microseconds a turn, so it runs on every caller turn in every state before anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from language.phrases import normalize, phrase_pattern

RULES_FILE = Path(__file__).parent / "data" / "red_flags.yaml"


class FlagRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    phrases: list[str] = Field(default_factory=list)
    near: list[tuple[str, str]] = Field(default_factory=list)
    unless: list[str] = Field(default_factory=list)  # words that explain it away
    crisis: bool = False  # self-harm: a person is needed, and the call is never ended

    @model_validator(mode="after")
    def _has_evidence(self) -> FlagRule:
        if not self.phrases and not self.near:
            raise ValueError("a flag needs phrases or near pairs")
        return self


class RedFlagRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(gt=0, le=20)
    negation_reach: int = Field(ge=0, le=6)
    negations: list[str] = Field(min_length=1)
    groups: dict[str, list[str]]
    flags: dict[str, FlagRule] = Field(min_length=1)

    @model_validator(mode="after")
    def _groups_exist(self) -> RedFlagRules:
        problems = [f"group {name!r} is empty" for name, words in self.groups.items() if not words]
        for flag, rule in self.flags.items():
            for pair in rule.near:
                problems += [f"flag {flag!r}: unknown group {g!r}" for g in pair
                             if g not in self.groups]
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class RedFlag:
    """A recognised red flag: which one, and the words that showed it."""

    flag: str
    evidence: str
    crisis: bool = False


@dataclass(frozen=True)
class RedFlagRecognizer:
    window: int
    negation_reach: int
    negations: re.Pattern[str]
    phrases: dict[str, re.Pattern[str] | None]
    near: dict[str, tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]]
    unless: dict[str, re.Pattern[str] | None]
    crisis: frozenset[str]
    # Per flag, the words one of which a turn must hold for the flag to be in it (each
    # phrase's and each first-group entry's longest word): most turns are done with after
    # a few set lookups, and only the flags whose words are there are matched.
    key_words: dict[str, frozenset[str]]

    @classmethod
    def from_rules(cls, rules: RedFlagRules) -> RedFlagRecognizer:
        groups = {name: phrase_pattern(words) for name, words in rules.groups.items()}
        return cls(
            window=rules.window,
            negation_reach=rules.negation_reach,
            negations=phrase_pattern(rules.negations),
            phrases={flag: phrase_pattern(rule.phrases) if rule.phrases else None
                     for flag, rule in rules.flags.items()},
            near={flag: tuple((groups[a], groups[b]) for a, b in rule.near)
                  for flag, rule in rules.flags.items()},
            unless={flag: phrase_pattern(rule.unless) if rule.unless else None
                    for flag, rule in rules.flags.items()},
            crisis=frozenset(flag for flag, rule in rules.flags.items() if rule.crisis),
            key_words={flag: frozenset(
                max(_spoken(words).split(), key=len) for words in
                [*rule.phrases, *(w for first, _ in rule.near for w in rules.groups[first])])
                for flag, rule in rules.flags.items()},
        )

    def first(self, text: str) -> RedFlag | None:
        """The first red flag in the caller's words, or None."""
        spoken = _spoken(text)
        said = set(spoken.split())
        for flag, pattern in self.phrases.items():
            if self.key_words[flag].isdisjoint(said):
                continue
            excuse = self.unless[flag]
            if excuse is not None and excuse.search(spoken):
                continue
            for match in pattern.finditer(spoken) if pattern else ():
                if not self._negated(spoken, match.start()):
                    return RedFlag(flag, match.group(0), flag in self.crisis)
            for left, right in self.near[flag]:
                evidence = self._close_together(spoken, left, right)
                if evidence is not None:
                    return RedFlag(flag, evidence, flag in self.crisis)
        return None

    def _close_together(
        self, spoken: str, left: re.Pattern[str], right: re.Pattern[str]
    ) -> str | None:
        lefts = [(m, _word_index(spoken, m.start())) for m in left.finditer(spoken)]
        if not lefts:
            return None
        for r in right.finditer(spoken):
            r_word = _word_index(spoken, r.start())
            for m, m_word in lefts:
                if m.start() < r.end() and r.start() < m.end():
                    continue  # one word cannot be both halves
                if abs(m_word - r_word) > self.window:
                    continue
                start = min(m.start(), r.start())
                if self._negated(spoken, start):
                    continue
                end = max(m.end(), r.end())
                return spoken[start:end]
        return None

    def _negated(self, spoken: str, start: int) -> bool:
        """A negation within `negation_reach` words before `start`, in the same clause."""
        clause = _CLAUSE_BREAK.split(spoken[:start])[-1].split()
        reach = " ".join(clause[-self.negation_reach:]) if self.negation_reach else ""
        return bool(reach) and self.negations.search(reach) is not None


_CLAUSE_BREAK = re.compile(r"[,.;:!?]|\bbut\b|\band\b")


_CONTRACTION = re.compile(r"'s\b")
_NOT_SPOKEN = re.compile(r"[^\w',.;:!? ]+")
_CLAUSE_MARK = re.compile(r"([,.;:!?])")


def _spoken(text: str) -> str:
    """Lower case, "arm's" → "arm is" (a contraction is a word), clause marks kept apart."""
    lowered = _CONTRACTION.sub(" is", normalize(text))
    return " ".join(_CLAUSE_MARK.sub(r" \1 ", _NOT_SPOKEN.sub(" ", lowered)).split())


def _word_index(text: str, offset: int) -> int:
    return text.count(" ", 0, offset)


def load_red_flags(path: Path = RULES_FILE) -> RedFlagRecognizer:
    return RedFlagRecognizer.from_rules(RedFlagRules.model_validate(yaml.safe_load(path.read_text())))


@lru_cache(maxsize=1)
def default_red_flags() -> RedFlagRecognizer:
    """The bundled rules, compiled once per process."""
    return load_red_flags()


def red_flag(text: str) -> RedFlag | None:
    """The first medical red flag in the caller's words (bundled rules), or None."""
    return default_red_flags().first(text)
