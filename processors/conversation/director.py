"""The conversation director's analysis: advice on the agent's next reply, once per turn.

Once per caller turn the director looks at the conversation so far and advises the
agent's next reply: the call phase, engagement, topic and tone, whether to stay or
shift, a reminder to deliver, the guidance itself and a reply length. Two backends give
the same `DirectorAnalysis`:

- `ModelDirector`: the fast model (Gemini Flash by default, else Claude Haiku), one
  structured request per turn, validated here; slow or junk answers raise and simply
  mean no guidance (the processor never waits for it on the voice path).
- `LocalDirector`: rules over the tracker's state and the quick observer's signals,
  offline and instant.

`condense` turns an analysis into the one line the LLM sees, e.g.
`main/medium/warm | REMIND: Take medication | (concerned)`. `hold_wind_down` keeps a
call the timer put into winding down there, whichever backend answered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field

from call.conversation import Observation
from call.conversation_tracker import ConversationTracker
from lib.model_answers import parse_answer
from lib.prompts import PROMPTS_DIR, render_prompt

Phase = Literal["opening", "rapport", "main", "winding_down", "closing"]
EngagementLevel = Literal["high", "medium", "low"]
EmotionalTone = Literal["positive", "neutral", "concerned", "sad"]
GuidanceTone = Literal["warm", "empathetic", "cheerful", "gentle", "serious"]

MAX_TOKENS = 400
TRANSCRIPT_TURNS = 12
OPENING_TURNS = 1  # caller turns still counted as the opening
SHORT_TURN_WORDS = 3
LONG_TURN_WORDS = 15


class Analysis(BaseModel):
    model_config = ConfigDict(extra="ignore")
    call_phase: Phase
    engagement_level: EngagementLevel
    current_topic: str = Field(max_length=120)
    emotional_tone: EmotionalTone


class Direction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    stay_or_shift: Literal["stay", "transition", "wrap_up"]
    next_topic: str | None = Field(default=None, max_length=120)
    pacing_note: Literal["good", "too_fast", "dragging", "time_to_close"]


class Reminder(BaseModel):
    model_config = ConfigDict(extra="ignore")
    should_deliver: bool = False
    which_reminder: str | None = Field(default=None, max_length=200)
    delivery_approach: str | None = Field(default=None, max_length=300)


class Guidance(BaseModel):
    model_config = ConfigDict(extra="ignore")
    tone: GuidanceTone
    priority_action: str = Field(max_length=200)
    specific_instruction: str = Field(max_length=400)


class ModelRecommendation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    use_sonnet: bool = False
    max_tokens: int = Field(default=150, ge=20, le=600)
    reason: str = Field(default="", max_length=300)


class DirectorAnalysis(BaseModel):
    """What the director answers: its analysis of the call and its direction for the reply."""

    model_config = ConfigDict(extra="ignore")
    analysis: Analysis
    direction: Direction
    reminder: Reminder = Field(default_factory=Reminder)
    guidance: Guidance
    model_recommendation: ModelRecommendation = Field(default_factory=ModelRecommendation)


def director_schema() -> dict:
    """The JSON schema the provider is asked to hold the answer to."""
    text = {"type": "string"}
    nullable = {"type": ["string", "null"]}

    def obj(properties: dict) -> dict:
        return {"type": "object", "properties": properties, "required": list(properties),
                "additionalProperties": False}

    def enum(*values: str) -> dict:
        return {"type": "string", "enum": list(values)}

    return obj({
        "analysis": obj({
            "call_phase": enum("opening", "rapport", "main", "winding_down", "closing"),
            "engagement_level": enum("high", "medium", "low"),
            "current_topic": text,
            "emotional_tone": enum("positive", "neutral", "concerned", "sad"),
        }),
        "direction": obj({
            "stay_or_shift": enum("stay", "transition", "wrap_up"),
            "next_topic": nullable,
            "pacing_note": enum("good", "too_fast", "dragging", "time_to_close"),
        }),
        "reminder": obj({
            "should_deliver": {"type": "boolean"},
            "which_reminder": nullable,
            "delivery_approach": nullable,
        }),
        "guidance": obj({
            "tone": enum("warm", "empathetic", "cheerful", "gentle", "serious"),
            "priority_action": text,
            "specific_instruction": text,
        }),
        "model_recommendation": obj({
            "use_sonnet": {"type": "boolean"},
            "max_tokens": {"type": "integer"},
            "reason": text,
        }),
    })


def parse_analysis(raw: str) -> DirectorAnalysis:
    """The model's answer, validated; ValueError (without echoing the answer: it may hold
    the caller's words) when it does not fit."""
    return parse_answer(raw, DirectorAnalysis, "director answer does not fit the schema")


_PHASE_LABELS = {"winding_down": "WINDING DOWN", "closing": "CLOSING"}
WRAPPING_UP: tuple[Phase, ...] = ("winding_down", "closing")


def hold_wind_down(analysis: DirectorAnalysis, winding_down: bool) -> DirectorAnalysis:
    """Once the call is winding down, no analysis takes it out of it: an earlier phase
    becomes winding down, with the wind-down advice instead of the analysis's own."""
    if not winding_down or analysis.analysis.call_phase in WRAPPING_UP:
        return analysis
    action, instruction = director_lines().local["winding_down"]
    return analysis.model_copy(update={
        "analysis": analysis.analysis.model_copy(update={"call_phase": "winding_down"}),
        "direction": analysis.direction.model_copy(
            update={"stay_or_shift": "wrap_up", "next_topic": None,
                    "pacing_note": "time_to_close"}),
        "guidance": analysis.guidance.model_copy(
            update={"priority_action": action, "specific_instruction": instruction}),
    })


def condense(analysis: DirectorAnalysis) -> str:
    """The single guidance line (`phase/engagement/tone | action | (feeling)`)."""
    a, g = analysis.analysis, analysis.guidance
    parts = [f"{a.call_phase}/{a.engagement_level}/{g.tone}"]
    reminder = analysis.reminder
    if reminder.should_deliver and reminder.which_reminder:
        parts.append(f"REMIND: {reminder.which_reminder}")
    elif a.call_phase in _PHASE_LABELS:
        parts.append(f"{_PHASE_LABELS[a.call_phase]}: {g.specific_instruction}")
    else:
        parts.append(f"{g.priority_action}: {g.specific_instruction}")
    if a.emotional_tone in ("concerned", "sad"):
        parts.append(f"({a.emotional_tone})")
    return " | ".join(parts)


@dataclass(frozen=True)
class DirectorView:
    """What a backend sees of the call at one caller turn."""

    clinic_name: str
    latest: str
    observation: Observation
    tracker: ConversationTracker
    elapsed_s: float
    winding_down: bool = False


class DirectorBackend(Protocol):
    name: str

    async def analyze(self, view: DirectorView) -> DirectorAnalysis: ...


@dataclass(frozen=True)
class DirectorLines:
    instruction: str
    local: dict[str, tuple[str, str]]
    winding_down: str
    winding_down_state: str  # what the model is told once the call is winding down
    force_end: str
    time_limit: dict[str, str]  # said at the time limit, by step (escalate, transfer, ...)


@lru_cache(maxsize=1)
def director_lines(path: Path = PROMPTS_DIR / "director" / "lines.yaml") -> DirectorLines:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    local = {key: (str(v[0]), str(v[1])) for key, v in raw["local"].items()}
    needed = {"opening", "main", "concerned", "sad", "disengaged", "winding_down", "closing"}
    if missing := needed - local.keys():
        raise ValueError(f"prompts/director/lines.yaml lacks local lines: {sorted(missing)}")
    time_limit = {key: str(line) for key, line in raw["time_limit"].items()}
    needed = {"escalate", "transfer", "offer_callback", "callback_confirmed", "callback_failed",
              "carry_on"}
    if missing := needed - time_limit.keys():
        raise ValueError(f"prompts/director/lines.yaml lacks time_limit lines: {sorted(missing)}")
    if "{call_time}" not in time_limit["callback_confirmed"]:  # a promise says when
        raise ValueError("prompts/director/lines.yaml: callback_confirmed must say {call_time}")
    return DirectorLines(str(raw["instruction"]), local, str(raw["winding_down"]),
                         str(raw["winding_down_state"]), str(raw["force_end"]), time_limit)


class LocalDirector:
    """The director's rules, offline: same output shape as the model's."""

    name = "local"

    async def analyze(self, view: DirectorView) -> DirectorAnalysis:
        return local_analysis(view)


def local_analysis(view: DirectorView) -> DirectorAnalysis:
    observation = view.observation
    # The tracker holds finished turns; the one being analysed is not in it yet.
    words = [*view.tracker.last_caller_words(2), len(view.latest.split())]
    average = sum(words) / len(words)
    engagement: EngagementLevel = (
        "low" if average <= SHORT_TURN_WORDS else "high" if average >= LONG_TURN_WORDS
        else "medium")
    ids = set(observation.signal_ids)
    valences = [s.valence for s in observation.signals if s.valence is not None]
    feeling: EmotionalTone = "neutral"
    if ids & {"sad", "lonely"}:
        feeling = "sad"
    elif (valences and min(valences) < -0.3) or any(
            s.category in ("safety", "health") for s in observation.signals):
        feeling = "concerned"
    elif valences and max(valences) > 0.3:
        feeling = "positive"

    phase: Phase = "main"
    if observation.goodbye == "strong":
        phase = "closing"
    elif observation.goodbye == "weak" or view.winding_down:
        phase = "winding_down"
    elif view.tracker.caller_turns < OPENING_TURNS:
        phase = "opening"

    situation = {"closing": "closing", "winding_down": "winding_down",
                 "opening": "opening"}.get(phase, "main")
    if situation == "main":
        if feeling in ("concerned", "sad"):
            situation = feeling
        elif engagement == "low" and len(words) >= 3:
            situation = "disengaged"
    action, instruction = director_lines().local[situation]
    tone: GuidanceTone = {"concerned": "empathetic", "sad": "gentle",
                          "positive": "cheerful"}.get(feeling, "warm")
    if phase in ("winding_down", "closing"):
        tone = "gentle" if feeling in ("concerned", "sad") else "warm"
    wrapping = phase in ("winding_down", "closing")
    return DirectorAnalysis(
        analysis=Analysis(call_phase=phase, engagement_level=engagement,
                          current_topic=", ".join(view.tracker.topics) or "the caller's request",
                          emotional_tone=feeling),
        direction=Direction(
            stay_or_shift="wrap_up" if wrapping else (
                "transition" if situation == "disengaged" else "stay"),
            pacing_note="time_to_close" if wrapping else (
                "dragging" if situation == "disengaged" else "good"),
        ),
        guidance=Guidance(tone=tone, priority_action=action, specific_instruction=instruction),
        model_recommendation=ModelRecommendation(
            max_tokens=observation.tokens, reason="quick observer signals"),
    )


class ModelDirector:
    """The fast model as the director (one per process: no per-call state)."""

    name = "model"

    def __init__(self, ask, *, timeout_s: float) -> None:
        """`ask`: pipeline.providers.structured_model(...) with `director_schema()`."""
        self._ask = ask
        self._timeout_s = timeout_s

    async def analyze(self, view: DirectorView) -> DirectorAnalysis:
        minutes, seconds = divmod(int(view.elapsed_s), 60)
        prompt = render_prompt(
            "director/analyze.md", clinic_name=view.clinic_name,
            elapsed=f"{minutes} min {seconds:02d} s",
            call_state=director_lines().winding_down_state if view.winding_down else "open",
            summary=view.tracker.summary() or "(nothing yet)",
            transcript=view.tracker.transcript(last=TRANSCRIPT_TURNS) or "(no turns yet)",
            latest=view.latest.replace('"', "'"),
        )
        raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
        return parse_analysis(raw)
