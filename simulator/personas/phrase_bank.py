"""The simulated caller's phrasings (data/phrases.yaml), picked with a seeded random.

A run with the same seed says the same things; a situation that comes up again is
said another way when the bank has one, as people do.
"""

from __future__ import annotations

import random
import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DATA_FILE = Path(__file__).resolve().parent / "data" / "phrases.yaml"
Style = Literal["plain", "terse", "rambling"]
# A value that opens a sentence ("Booking. {service}.") starts with a capital.
_SENTENCE_START = re.compile(r"([.!?] +)([a-z])")
PLACEHOLDERS = frozenset({
    "first", "last", "full", "dob", "service", "reason", "when", "appointment", "message",
    "words", "phone", "spelled", "choice", "day", "wrong", "right", "clauses", "side",
    "asked",
})


class Variants(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plain: list[str] = Field(min_length=1)
    terse: list[str] = Field(default_factory=list)
    rambling: list[str] = Field(default_factory=list)


class PhraseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lines: dict[str, Variants] = Field(min_length=1)
    rambling_before: list[str] = Field(min_length=1)
    rambling_after: list[str] = Field(min_length=1)
    interrupting_before: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _known_placeholders(self) -> PhraseFile:
        for key, variants in self.lines.items():
            for text in variants.plain + variants.terse + variants.rambling:
                used = {name for _, name, _, _ in string.Formatter().parse(text) if name}
                unknown = used - PLACEHOLDERS
                if unknown:
                    raise ValueError(f"{key}: unknown placeholder(s) {sorted(unknown)} in {text!r}")
        return self


class PhraseBankError(ValueError):
    """The phrase file does not follow its model."""


@lru_cache(maxsize=1)
def phrase_file() -> PhraseFile:
    try:
        return PhraseFile.model_validate(yaml.safe_load(DATA_FILE.read_text(encoding="utf-8")))
    except ValidationError as error:
        raise PhraseBankError(f"{DATA_FILE}: {error}") from error


class PhraseBank:
    """One caller's way of saying things: their style and their own random sequence."""

    def __init__(self, rng: random.Random, style: Style = "plain",
                 phrases: PhraseFile | None = None) -> None:
        self._rng = rng
        self._style = style
        self._file = phrases or phrase_file()
        self._last: dict[str, str] = {}

    def has(self, key: str) -> bool:
        return key in self._file.lines

    def say(self, key: str, *, sentence: bool = True, **values: str) -> str:
        """A phrasing of situation `key` in this caller's style, filled with `values`
        (capitalized as a sentence unless it is a part of one)."""
        variants = self._file.lines[key]
        options = getattr(variants, self._style) or variants.plain
        fresh = [text for text in options if text != self._last.get(key)] or options
        chosen = self._rng.choice(fresh)
        self._last[key] = chosen
        said = _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(),
                                   chosen.format_map(_Values(values)))
        return _capitalized(said) if sentence else said

    def around(self, line: str, *, rambling: bool, interrupting: bool) -> str:
        """A line with what this caller says around it: a rambling aside now and then,
        an apology for talking over the agent."""
        if rambling and self._rng.random() < 0.5:
            line = f"{self._rng.choice(self._file.rambling_before)} {line}"
        if rambling and self._rng.random() < 0.35:
            line = f"{line} {self._rng.choice(self._file.rambling_after)}"
        if interrupting:
            line = f"{self._rng.choice(self._file.interrupting_before)} {line}"
        return line


class _Values(dict):
    """format_map values: a placeholder with no value is an error that names it."""

    def __missing__(self, key: str) -> str:
        raise KeyError(f"no value for {{{key}}}")


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text
