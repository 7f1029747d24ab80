"""What the engage LLM is told about how the caller sounds, on two paths.

- Per message: every caller message carries `[VOICE: Anxiety, valence=-0.312]`, so the
  model sees the emotional trajectory across the whole conversation.
- Per session: a block in the system instruction, refreshed each turn — the dominant
  emotion and trend, the response for it (the Emotion → Response matrix, else the
  valence–arousal quadrant), hostile words, behavioural signals, call-phase urgency and,
  when voice and words disagree, "respond to how they sound, not what they claim". The agent is told
  never to say that it can tell.

The words live in `prompts/emotion/steering.yaml`, checked when loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from call.voice_settings import TONES
from lib.prompts import PROMPTS_DIR
from processors.emotion.state import EmotionSnapshot, Trend
from services.emotion.dimensions import emotion_table

STEERING_FILE = PROMPTS_DIR / "emotion" / "steering.yaml"
REGISTERS = frozenset({
    "suppressed", "reassuring", "warm", "simple", "engaged", "encouraging", "concise",
    "professional", "neutral",
})


class Response(BaseModel):
    """How all adaptation channels respond to one caller state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tone: str
    filler: str
    instruction: str

    @model_validator(mode="after")
    def _known(self) -> Response:
        if self.tone not in TONES:
            raise ValueError(f"unknown tone {self.tone!r}")
        if self.filler not in REGISTERS:
            raise ValueError(f"unknown filler register {self.filler!r}")
        return self


class Group(Response):
    labels: list[str]


class BurstTone(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tone: str
    state: str
    seed: bool = False


class CallPhase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mid_after_min: float = Field(gt=0)
    late_after_min: float = Field(gt=0)
    mid: str
    late: str


class HostileWords(BaseModel):
    model_config = ConfigDict(extra="forbid")

    above: float = Field(gt=0, le=1)
    text: str


class Behaviour(BaseModel):
    model_config = ConfigDict(extra="forbid")

    barge_ins: str
    short_replies: str
    silences: str


class Steering(BaseModel):
    model_config = ConfigDict(extra="forbid")

    groups: list[Group]
    high_arousal: float = Field(gt=0, lt=1)
    quadrants: dict[str, Response]
    bursts: dict[str, BurstTone]
    call_phase: CallPhase
    coherence_warning: str
    hostile_words: HostileWords
    behaviour: Behaviour
    trend: dict[Trend, str]
    template: str

    @model_validator(mode="after")
    def _consistent(self) -> Steering:
        table = emotion_table()
        problems = [f"unknown label {label!r}" for group in self.groups
                    for label in group.labels if label not in table.dimensions]
        problems += [f"unknown burst type {name!r}" for name in self.bursts
                     if table.burst(name) != name]
        problems += [f"burst {name!r}: unknown tone {b.tone!r}" for name, b in self.bursts.items()
                     if b.tone not in TONES]
        wanted = {"high_negative", "low_negative", "high_positive", "low_positive"}
        if set(self.quadrants) != wanted:
            problems.append(f"quadrants must be exactly {sorted(wanted)}")
        seen: set[str] = set()
        for group in self.groups:
            twice = seen & set(group.labels)
            if twice:
                problems.append(f"labels in two groups: {sorted(twice)}")
            seen |= set(group.labels)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def response_for(self, label: str | None, valence: float, arousal: float) -> Response:
        """The matrix row for the label, else the valence–arousal quadrant."""
        for group in self.groups:
            if label in group.labels:
                return group
        side = "positive" if valence >= 0 else "negative"
        level = "high" if arousal >= self.high_arousal else "low"
        return self.quadrants[f"{level}_{side}"]


@lru_cache(maxsize=1)
def steering_rules(path: Path = STEERING_FILE) -> Steering:
    return Steering.model_validate(yaml.safe_load(path.read_text()))


VOICE_TAG = re.compile(r"\s*\[VOICE: [^\]]*\]")


def strip_voice_tag(text: str) -> str:
    """The caller's words without the `[VOICE: ...]` tag steering added for the LLM."""
    return VOICE_TAG.sub("", text).strip()


def annotation(snapshot: EmotionSnapshot) -> str | None:
    """The inline tag for one caller message (None: nothing heard yet)."""
    if snapshot.dominant is None:
        return None
    return f"[VOICE: {snapshot.dominant}, valence={snapshot.valence:.3f}]"


def call_phase_urgency(snapshot: EmotionSnapshot, elapsed_s: float) -> str | None:
    """Call-phase escalation: mid calls that worsen, late calls still negative."""
    phase = steering_rules().call_phase
    minutes = elapsed_s / 60
    if minutes >= phase.late_after_min and snapshot.valence < 0:
        return phase.late
    if minutes >= phase.mid_after_min and snapshot.trend is Trend.DETERIORATING:
        return phase.mid
    return None


@dataclass(frozen=True)
class SessionSteering:
    text: str
    response: Response
    urgency: str | None
    masking: bool


def session_steering(snapshot: EmotionSnapshot, elapsed_s: float) -> SessionSteering | None:
    """The system-instruction block for this turn (None: too little heard to steer by)."""
    if not snapshot.steerable:
        return None
    rules = steering_rules()
    response = rules.response_for(snapshot.dominant, snapshot.valence, snapshot.arousal)
    extra: list[str] = []
    if snapshot.masking and snapshot.words_dominant:
        extra.append(rules.coherence_warning.format(
            words=snapshot.words_dominant.lower(), voice=snapshot.dominant.lower()))
    hostile = sorted(kind for kind, score in snapshot.toxicity.items()
                     if score >= rules.hostile_words.above)
    if hostile:
        extra.append(rules.hostile_words.text.format(
            kinds=", ".join(kind.replace("_", " ") for kind in hostile)))
    signals = snapshot.signals
    if signals.barge_ins >= 2:
        extra.append(rules.behaviour.barge_ins.format(count=signals.barge_ins))
    if signals.short_reply_streak >= 3:
        extra.append(rules.behaviour.short_replies.format(count=signals.short_reply_streak))
    if signals.long_silences >= 2:
        extra.append(rules.behaviour.silences.format(count=signals.long_silences))
    urgency = call_phase_urgency(snapshot, elapsed_s)
    if urgency:
        extra.append(urgency)
    text = rules.template.format(
        emotion=snapshot.dominant.lower(), trend=rules.trend[snapshot.trend],
        instruction=response.instruction, extra="\n".join(extra),
    ).strip()
    return SessionSteering(text, response, urgency, snapshot.masking)
