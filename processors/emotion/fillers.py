"""Fillers: a few words the moment the agent has to think.

Whether: only when the work ahead is expected to take longer than `FILLER_AFTER_MS`
(`LatencyEstimate` learns it per kind of work from what each turn measured), when the
workspace allows fillers, and never for a frustrated caller — valence < -0.2 and arousal
> 0.4 mean they want the answer, not an acknowledgement — unless the emotion is
Anxiety, Fear or Distress, which reassurance helps.
What: 2–4 words normally, 3–5 while audio is re-checked; the register follows the
caller's state (steering.yaml); the graph action's own hint is a suggestion used when the
caller's state asks for nothing special. A fast model writes them when one navigates
(flows/llm_navigator); offline they come from `prompts/emotion/fillers.yaml`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from lib.prompts import PROMPTS_DIR
from processors.emotion.state import EmotionSnapshot
from processors.emotion.steering import REGISTERS, steering_rules

FILLERS_FILE = PROMPTS_DIR / "emotion" / "fillers.yaml"
FILLER_AFTER_MS = 700.0
SUPPRESS_BELOW_VALENCE = -0.2
SUPPRESS_ABOVE_AROUSAL = 0.4
STILL_REASSURED = frozenset({"Anxiety", "Fear", "Distress"})
NORMAL_WORDS = (2, 4)
VERIFYING_WORDS = (3, 5)


class _Register(BaseModel):
    model_config = ConfigDict(extra="forbid")

    guidance: str
    short: list[str]
    long: list[str]


class FillerSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suppressed_guidance: str
    registers: dict[str, _Register]

    @model_validator(mode="after")
    def _fits(self) -> FillerSet:
        problems = []
        missing = (REGISTERS - {"suppressed"}) - set(self.registers)
        if missing:
            problems.append(f"registers without phrases: {sorted(missing)}")
        for name, phrases in self.registers.items():
            for length, (low, high) in (("short", NORMAL_WORDS), ("long", VERIFYING_WORDS)):
                for phrase in getattr(phrases, length):
                    if not low <= len(phrase.split()) <= high:
                        problems.append(f"{name}.{length}: {phrase!r} is not {low}-{high} words")
        if problems:
            raise ValueError("; ".join(problems))
        return self


@lru_cache(maxsize=1)
def filler_set(path: Path = FILLERS_FILE) -> FillerSet:
    return FillerSet.model_validate(yaml.safe_load(path.read_text()))


def suppressed(snapshot: EmotionSnapshot | None) -> bool:
    """No filler for a frustrated caller (valence and arousal past the thresholds), unless
    the emotion is one that reassurance helps (`STILL_REASSURED`)."""
    if snapshot is None or not snapshot.steerable:
        return False
    return (snapshot.valence < SUPPRESS_BELOW_VALENCE
            and snapshot.arousal > SUPPRESS_ABOVE_AROUSAL
            and snapshot.dominant not in STILL_REASSURED)


def register_for(snapshot: EmotionSnapshot | None) -> str:
    """The emotional register of a filler: `neutral` until there is enough to steer by."""
    if snapshot is None or not snapshot.steerable:
        return "neutral"
    return steering_rules().response_for(
        snapshot.dominant, snapshot.valence, snapshot.arousal).filler


def words_for(verifying: bool) -> tuple[int, int]:
    return VERIFYING_WORDS if verifying else NORMAL_WORDS


def filler_guidance(snapshot: EmotionSnapshot | None, fillers: FillerSet | None = None) -> str:
    """How a model that writes its own filler should make it: the caller's register, its
    length for the wait, a hint at what comes next (or: none at all, for frustration)."""
    fillers = fillers or filler_set()
    register = "suppressed" if suppressed(snapshot) else register_for(snapshot)
    if register == "suppressed":
        return fillers.suppressed_guidance
    (low, high), (vlow, vhigh) = NORMAL_WORDS, VERIFYING_WORDS
    return (f"{low}-{high} words ({vlow}-{vhigh} if you set verify_audio), "
            f"{fillers.registers[register].guidance}, hinting at what the agent does next")


@dataclass
class LatencyEstimate:
    """What a kind of work (navigator model, engage LLM, a tool) is expected to take:
    an exponentially weighted mean of what it took, starting from a prior."""

    prior_ms: dict[str, float]
    alpha: float = 0.3
    _ms: dict[str, float] = field(default_factory=dict)

    def expected_ms(self, kind: str) -> float:
        return self._ms.get(kind, self.prior_ms.get(kind, 0.0))

    def observe(self, kind: str, took_ms: float) -> None:
        before = self.expected_ms(kind)
        self._ms[kind] = took_ms if kind not in self._ms and kind not in self.prior_ms else (
            (1 - self.alpha) * before + self.alpha * took_ms)


@dataclass
class FillerDecision:
    say: str | None
    register: str
    why: str


class FillerPicker:
    """Chooses the call's fillers, never the same phrase twice in a row."""

    def __init__(self, fillers: FillerSet | None = None) -> None:
        self.fillers = fillers or filler_set()
        self._turn = 0
        self._last: str | None = None

    def decide(
        self, snapshot: EmotionSnapshot | None, *, expected_ms: float, enabled: bool = True,
        hint: str | None = None, proposed: str | None = None, verifying: bool = False,
    ) -> FillerDecision:
        """`proposed`: a model's filler (first wins); `hint`: the graph action's."""
        register = register_for(snapshot)
        if not enabled:
            return FillerDecision(None, register, "fillers off for this workspace")
        if suppressed(snapshot) or register == "suppressed":
            return FillerDecision(None, "suppressed", "frustrated caller: the answer, not filler")
        if expected_ms < FILLER_AFTER_MS:
            return FillerDecision(None, register, f"expected {expected_ms:.0f} ms: no silence")
        if proposed:
            return self._said(proposed, register, "from the navigator model")
        if hint and register == "neutral":
            return self._said(hint, register, "the action's hint")
        phrases = self.fillers.registers[register]
        options = phrases.long if verifying else phrases.short
        self._turn += 1
        choice = options[self._turn % len(options)]
        if choice == self._last:
            choice = options[(self._turn + 1) % len(options)]
        return self._said(choice, register, f"{register} register")

    def _said(self, text: str, register: str, why: str) -> FillerDecision:
        self._last = text
        return FillerDecision(text, register, why)
