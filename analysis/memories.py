"""What a finished call leaves to remember for the patient's next calls.

From the call's record, the caller's own sentences about themselves worth keeping: when
they like to come in, whom and where they prefer, how to reach them, what they need to
get here or to understand us, what they live with, what is coming up in their life. Each
is the caller's words, linked to the turn that said it; nothing about anyone else (a
child, a partner) and nothing the agent said.

`RulesMemoryExtractor` reads each sentence against `data/memory_patterns.yaml`;
`ModelMemoryExtractor` asks the fast model, and keeps only quotes found in the caller
turn it names that the rules would not refuse as someone else's. A model that fails,
times out or answers junk leaves the rules' memories, marked with why.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

import yaml
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, field_validator

from analysis.turn_links import numbered_transcript
from db.call_analyses import CallRecord
from db.memories import MemoryCandidate
from language.patterns import valid_regex
from lib.model_answers import parse_answer
from lib.prompts import render_prompt

PATTERNS_FILE = Path(__file__).resolve().parent / "data" / "memory_patterns.yaml"
MEMORY_CHARS = 240  # a sentence longer than this is cut: memories are short
# A sentence ends at . ! ? (not a title's dot: "Dr. Patel") or a semicolon.
_SENTENCE = re.compile(r"(?<!\b[Dd]r\.)(?<!\b[Mm]r\.)(?<!\b[Mm]rs\.)(?<!\b[Mm]s\.)"
                       r"(?<!\b[Ss]t\.)(?<=[.!?])\s+|\s*;\s*")
_WORDS = re.compile(r"[a-z0-9']+")
Kind = Literal["fact", "preference", "event"]
StructuredAsk = Callable[[str], Awaitable[str]]


class MemoryExtractor(Protocol):
    name: str

    async def extract(self, record: CallRecord) -> Extracted: ...


class Extracted(list[MemoryCandidate]):
    """The memories one extraction found, with who found them and, when the model
    failed, why the rules' are given instead."""

    def __init__(self, items: list[MemoryCandidate], *, analyst: str,
                 fallback: str | None = None) -> None:
        super().__init__(items)
        self.analyst, self.fallback = analyst, fallback


# --- the rules --------------------------------------------------------------------------


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    kind: Kind
    patterns: list[str] = Field(min_length=1)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return [valid_regex(p) for p in patterns]


class _Patterns(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int
    first_person: list[str] = Field(min_length=1)
    someone_else: list[str] = Field(min_length=1)
    rules: list[_Rule] = Field(min_length=1)

    @field_validator("first_person", "someone_else")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return [valid_regex(p) for p in patterns]


@dataclass(frozen=True)
class MemoryPatterns:
    first_person: re.Pattern[str]
    someone_else: re.Pattern[str]
    rules: tuple[tuple[str, Kind, re.Pattern[str]], ...]  # (name, kind, any of its patterns)

    def kind_of(self, sentence: str) -> Kind | None:
        """The kind of memory `sentence` is (None: nothing the caller said of themselves
        worth keeping)."""
        said = _plain(sentence)
        if not self.first_person.search(said) or self.someone_else.search(said):
            return None
        return next((kind for _, kind, pattern in self.rules if pattern.search(said)), None)

    def about_someone_else(self, sentence: str) -> bool:
        said = _plain(sentence)
        return not self.first_person.search(said) or bool(self.someone_else.search(said))


def _either(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@lru_cache(maxsize=1)
def memory_patterns(path: Path = PATTERNS_FILE) -> MemoryPatterns:
    data = _Patterns.model_validate(yaml.safe_load(path.read_text()))
    return MemoryPatterns(_either(data.first_person), _either(data.someone_else),
                          tuple((r.name, r.kind, _either(r.patterns)) for r in data.rules))


def _plain(text: str) -> str:
    return text.lower().replace("’", "'").strip()


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _memory_text(sentence: str) -> str:
    text = sentence.strip()[:MEMORY_CHARS].strip()
    return text[:1].upper() + text[1:]


class RulesMemoryExtractor:
    """The caller's sentences that match a rule of `data/memory_patterns.yaml`."""

    name = "rules"

    def __init__(self, patterns: MemoryPatterns | None = None) -> None:
        self._patterns = patterns or memory_patterns()

    async def extract(self, record: CallRecord) -> Extracted:
        return Extracted(self.extract_now(record), analyst=self.name)

    def extract_now(self, record: CallRecord) -> list[MemoryCandidate]:
        found: list[MemoryCandidate] = []
        seen: set[str] = set()
        for turn in record.caller_turns():
            for sentence in sentences(turn.text):
                kind = self._patterns.kind_of(sentence)
                key = " ".join(_WORDS.findall(_plain(sentence)))
                if kind is not None and key not in seen:
                    seen.add(key)
                    found.append(MemoryCandidate(_memory_text(sentence), kind, "analysis",
                                                 turn.seq))
        return found


# --- the fast model ---------------------------------------------------------------------


class _Remembered(BaseModel):
    turn: int
    quote: str = Field(min_length=1, max_length=1000)
    kind: Kind


class _MemoryAnswer(BaseModel):
    memories: list[_Remembered] = Field(max_length=30)


def memory_schema() -> dict:
    """The JSON the model must answer."""
    return {
        "type": "object",
        "properties": {"memories": {"type": "array", "items": {
            "type": "object",
            "properties": {"turn": {"type": "integer"}, "quote": {"type": "string"},
                           "kind": {"type": "string", "enum": ["preference", "fact", "event"]}},
            "required": ["turn", "quote", "kind"]}}},
        "required": ["memories"],
    }


class ModelMemoryExtractor:
    """The fast model's picks, held to the caller's own words; the rules when it fails."""

    def __init__(self, ask: StructuredAsk, *, timeout_s: float, name: str = "model",
                 fallback: RulesMemoryExtractor | None = None,
                 patterns: MemoryPatterns | None = None) -> None:
        """`ask`: pipeline.providers.structured_model(...) with `memory_schema()`."""
        self._ask, self._timeout_s, self.name = ask, timeout_s, name
        self._patterns = patterns or memory_patterns()
        self._fallback = fallback or RulesMemoryExtractor(self._patterns)

    async def extract(self, record: CallRecord) -> Extracted:
        if not record.caller_turns():
            return Extracted([], analyst=self.name)
        try:
            raw = await asyncio.wait_for(self._ask(render_prompt(
                "analysis/memories.md", transcript=numbered_transcript(record))), self._timeout_s)
            answer = parse_answer(raw, _MemoryAnswer, "memories answer does not fit")
        except Exception as error:  # noqa: BLE001 - the rules' memories stand
            reason = "timeout" if isinstance(error, TimeoutError) else type(error).__name__
            logger.warning(f"memories of call {record.call_id}: model failed ({reason}); rules")
            return Extracted(self._fallback.extract_now(record), analyst=self._fallback.name,
                             fallback=reason)
        kept = self._held_to_the_words(record, answer)
        logger.info(f"memories of call {record.call_id}: model picked {len(answer.memories)}, "
                    f"kept {len(kept)}")
        return Extracted(kept, analyst=self.name)

    def _held_to_the_words(self, record: CallRecord, answer: _MemoryAnswer
                           ) -> list[MemoryCandidate]:
        """The picks quoted from the caller turn they name, about the caller themselves."""
        turns = {t.seq: t for t in record.caller_turns()}
        kept: list[MemoryCandidate] = []
        seen: set[str] = set()
        for pick in answer.memories:
            turn = turns.get(pick.turn)
            quote = " ".join(_WORDS.findall(_plain(pick.quote)))
            if turn is None or not quote or quote not in " ".join(
                    _WORDS.findall(_plain(turn.text))):
                continue
            if self._patterns.about_someone_else(pick.quote) or quote in seen:
                continue
            seen.add(quote)
            kept.append(MemoryCandidate(_memory_text(pick.quote), pick.kind, "analysis",
                                        turn.seq))
        return kept
