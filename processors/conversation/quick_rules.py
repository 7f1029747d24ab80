"""The quick observer's rules: regular expressions over one caller turn, no model, ~0 ms.

The patterns live in `data/quick_patterns.yaml` (validated and compiled once); this
module only matches them and turns the matches into what the pipeline needs: the
signals, whether the caller said goodbye (strong, weak, or taken back in the same
breath), how engaged they sound, one compact guidance line for the LLM, and the reply
length the turn calls for.

A goodbye pattern's match is a farewell only at the end of the turn (`FarewellRules`):
not the word in another sense ("I never got to say goodbye to her"), not taken back
("bye, oh wait"), and not followed by more than a few words that are not themselves
closing words. A turn that holds the call open (a farewell said in a crisis) is never a
goodbye.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from call.conversation import Engagement, GoodbyeStrength, Observation, Signal
from language.patterns import any_of, valid_regex, whole_words
from processors.safety.red_flags import red_flag

DATA_FILE = Path(__file__).resolve().parent / "data" / "quick_patterns.yaml"

# One guidance line names at most this many categories (the most urgent first).
MAX_GUIDANCE_CATEGORIES = 3
DEFAULT_TOKENS = 150
# The pattern whose guidance a medical red flag said in everyday words also gets.
EMERGENCY_SIGNAL = "emergency"
URGENT_CATEGORIES = frozenset({"safety", "health"})  # their own guidance says it already

# The one placeholder guidance may hold: the configured emergency number (a number of the
# guidance's own would be an invented one).
GUIDANCE_PLACEHOLDERS = frozenset({"emergency_number"})


def _valid_regexes(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        if pattern != pattern.lower():
            raise ValueError(f"patterns are matched on lower-cased text: {pattern!r}")
        valid_regex(pattern)
    return patterns


class PatternSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    regex: str
    guidance: str = Field(min_length=1)
    tokens: int = Field(default=DEFAULT_TOKENS, ge=20, le=600)
    valence: float | None = Field(default=None, ge=-1, le=1)
    intensity: float | None = Field(default=None, ge=0, le=1)
    strength: GoodbyeStrength | None = None
    clause_start: bool = False
    holds_call: bool = False
    escalate: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _valid_regexes([value])[0]

    @field_validator("guidance")
    @classmethod
    def _no_numbers_of_its_own(cls, value: str) -> str:
        template = Template(value)
        unknown = set(template.get_identifiers()) - GUIDANCE_PLACEHOLDERS
        if unknown or not template.is_valid():
            raise ValueError(f"guidance may only hold $emergency_number: {value!r}")
        if any(ch.isdigit() for ch in value):
            raise ValueError(f"guidance must not hold a number of its own: {value!r}")
        return value


class CategorySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tag: str = Field(pattern=r"^[A-Z][A-Z_]*$")
    priority: int = Field(ge=1)
    patterns: list[PatternSpec] = Field(min_length=1)


class EngagementSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    short_words: int = Field(ge=1)
    long_words: int = Field(ge=2)


class FarewellSpec(BaseModel):
    """When a goodbye pattern is a farewell: at the end of the turn, not taken back, not
    the word used in another sense."""

    model_config = ConfigDict(extra="forbid")

    tail_words: int = Field(ge=0, le=10)
    closing_words: list[str] = Field(min_length=1)
    taken_back: list[str] = Field(min_length=1)
    other_senses: list[str] = Field(min_length=1)
    clause_leads: list[str] = Field(min_length=1)
    requests: list[str] = Field(min_length=1)

    @field_validator("closing_words", "taken_back", "other_senses", "clause_leads",
                     "requests")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return _valid_regexes(patterns)


class PatternFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    engagement: EngagementSpec
    farewell: FarewellSpec
    categories: dict[str, CategorySpec]
    @model_validator(mode="after")
    def _consistent(self) -> PatternFile:
        ids = [p.id for c in self.categories.values() for p in c.patterns]
        duplicates = {i for i in ids if ids.count(i) > 1}
        if duplicates:
            raise ValueError(f"pattern ids used twice: {sorted(duplicates)}")
        goodbye = self.categories.get("goodbye")
        if goodbye is None or not any(p.strength == "strong" for p in goodbye.patterns):
            raise ValueError("a goodbye category with a strong goodbye pattern is required")
        if EMERGENCY_SIGNAL not in ids:
            raise ValueError(f"a pattern with id {EMERGENCY_SIGNAL!r} is required")
        for name, category in self.categories.items():
            for pattern in category.patterns:
                if (pattern.strength is not None) != (name == "goodbye"):
                    raise ValueError(f"{pattern.id}: only goodbye patterns have a strength")
                if pattern.clause_start and pattern.strength is None:
                    raise ValueError(f"{pattern.id}: only goodbye patterns start a clause")
                if name == "emotion" and (pattern.valence is None or pattern.intensity is None):
                    raise ValueError(f"{pattern.id}: emotion patterns need valence and intensity")
        return self


_WORD = re.compile(r"[\w']+")
_SENTENCE_END = re.compile(r"[.!]+(?:\s|$)")
Verdict = Literal["said", "taken_back"]


class FarewellRules:
    """Whether a goodbye pattern's match in a turn is the caller saying goodbye."""

    def __init__(self, spec: FarewellSpec, goodbye_regexes: list[str]) -> None:
        self._tail_words = spec.tail_words
        self._closing = re.compile(any_of(goodbye_regexes + spec.closing_words))
        self._taken_back = re.compile(any_of(spec.taken_back))
        self._other_senses = re.compile(any_of(spec.other_senses))
        self._requests = re.compile(any_of(spec.requests))
        leads = "|".join(f"(?:{p})" for p in spec.clause_leads)
        self._clause_start = re.compile(rf"(?:^|[^\w\s]|\b(?:{leads}))\W*$")

    def verdict(self, text: str, match: re.Match[str], signal: Signal) -> Verdict | None:
        """"said", "taken_back" ("bye, oh wait"), or None: the word in another sense, or
        a goodbye the turn goes on after."""
        start, end = match.span()
        if any(start in range(*m.span()) for m in self._other_senses.finditer(text)):
            return None
        if signal.clause_start and not self._clause_start.search(text[:start]):
            return None
        if self._taken_back.search(text, end):
            return "taken_back"
        after = text[end:]
        sentence_end = _SENTENCE_END.search(after)
        later = after[sentence_end.end():] if sentence_end is not None else ""
        if later and "?" not in later and not self._requests.search(later):
            after = after[:sentence_end.start()]  # an afterthought that asks for nothing
        rest = self._closing.sub(" ", after)
        if len(_WORD.findall(rest)) <= self._tail_words:
            return "said"
        return None


class QuickRules:
    """The compiled pattern set; `observe` is pure and safe to share between calls.

    Each category's patterns are alternatives of one regular expression, the categories
    scanned most urgent first: where two patterns match the same words, the more urgent
    one is the signal (a later match over words already claimed is dropped).
    """

    def __init__(self, spec: PatternFile) -> None:
        self.spec = spec
        ordered = sorted(spec.categories.items(), key=lambda item: item[1].priority)
        self._signals: list[Signal] = []
        self._scans: list[re.Pattern[str]] = []
        for name, category in ordered:
            alternatives: list[str] = []
            for pattern in category.patterns:
                alternatives.append(f"(?P<p{len(self._signals)}>{pattern.regex})")
                self._signals.append(Signal(
                    name, pattern.id, category.tag, category.priority, pattern.guidance,
                    pattern.tokens, pattern.valence, pattern.intensity, pattern.strength,
                    pattern.clause_start, pattern.holds_call, pattern.escalate,
                ))
            # The word boundaries outside the alternation: alternatives are tried only
            # where a word starts. One scan per category, not one for all: a smaller
            # alternation keeps the engine's first-character check, twice as fast here.
            # The text is lower-cased once instead of matching case-insensitively.
            self._scans.append(re.compile(whole_words("|".join(alternatives))))
        self._emergency = next(s for s in self._signals if s.id == EMERGENCY_SIGNAL)
        self.farewell = FarewellRules(spec.farewell, [
            p.regex for p in spec.categories["goodbye"].patterns])

    @property
    def pattern_count(self) -> int:
        return len(self._signals)

    @property
    def escalated_concepts(self) -> set[str]:
        """The safety concepts some pattern escalates on its own (their keys)."""
        return {s.escalate for s in self._signals if s.escalate is not None}

    def _matches(self, text: str) -> list[tuple[re.Match[str], Signal]]:
        """Every pattern match in the turn, in the order said; words matched by a more
        urgent category are not matched again."""
        claimed: list[range] = []
        found: list[tuple[re.Match[str], Signal]] = []
        for scan in self._scans:
            for match in scan.finditer(text):
                span = range(*match.span())
                if any(span.start in taken or taken.start in span for taken in claimed):
                    continue
                claimed.append(span)
                found.append((match, self._signals[int(match.lastgroup[1:])]))
        return sorted(found, key=lambda item: item[0].start())

    def observe(self, text: str) -> Observation:
        text = text.replace("\u2019", "'").lower()
        signals: list[Signal] = []
        strong: Verdict | None = None  # the last strong goodbye's verdict that counts
        weak: Signal | None = None
        for match, signal in self._matches(text):
            if signal.strength is None:
                if signal not in signals:
                    signals.append(signal)
                continue
            verdict = self.farewell.verdict(text, match, signal)
            if verdict is None:
                continue
            if signal.strength == "weak":
                weak = signal if verdict == "said" else weak
            else:
                strong = verdict
                if verdict == "said" and signal not in signals:
                    signals.append(signal)
        goodbye: GoodbyeStrength | None = (
            "strong" if strong == "said" else "weak" if weak is not None and strong is None
            else None)
        if goodbye == "weak":
            signals.append(weak)
        if any(s.holds_call for s in signals):
            goodbye = None
            signals = [s for s in signals if s.strength is None]
        medical = red_flag(text)  # symptoms no pattern named, in everyday words
        if medical is not None and not medical.crisis and not any(
                s.category in URGENT_CATEGORIES for s in signals):
            signals.append(self._emergency)
        signals.sort(key=lambda s: s.priority)
        words = len(text.split())
        engagement: Engagement = (
            "low" if words <= self.spec.engagement.short_words
            else "high" if words >= self.spec.engagement.long_words else "medium"
        )
        return Observation(
            signals=tuple(signals), goodbye=goodbye, false_goodbye=strong == "taken_back",
            engagement=engagement, guidance=compose_guidance(signals),
            tokens=max((s.tokens for s in signals), default=DEFAULT_TOKENS),
        )


def compose_guidance(signals: list[Signal]) -> str | None:
    """One line: the first signal of each category, most urgent category first."""
    first: dict[str, Signal] = {}
    for signal in signals:
        first.setdefault(signal.category, signal)
    chosen = sorted(first.values(), key=lambda s: s.priority)[:MAX_GUIDANCE_CATEGORIES]
    if not chosen:
        return None
    return " ".join(f"[{s.tag}] {s.guidance}" for s in chosen)


def render_guidance(guidance: str, *, emergency_number: str) -> str:
    """Guidance as the LLM reads it: the configured emergency number put in."""
    return Template(guidance).substitute(emergency_number=emergency_number)


def load_rules(path: Path = DATA_FILE) -> QuickRules:
    return QuickRules(PatternFile.model_validate(yaml.safe_load(path.read_bytes())))


@lru_cache(maxsize=1)
def quick_rules() -> QuickRules:
    """The bundled rules, compiled once per process (AppRuntime.start loads them)."""
    return load_rules()
