"""The voice tone priority chain: six levels, each only if the one above gave no signal.

1. a vocal burst in the last 5 s with confidence >= 0.5 (a caller who just laughed
   hears warmth at once);
2. the caller's prosody: the dominant emotion with a score >= 0.25, through the
   Emotion → Response matrix, once at least two segments were heard (the same rule
   as steering: one angry segment is not enough to change the voice; a burst, above,
   keeps its own rule);
3. proactive topic sensitivity: what the agent is about to say touches one of the
   workspace's `sensitive_topics` (healthcare defaults) → sympathetic, before any
   distress shows;
4. tone momentum: last turn's tone (a weak signal never causes a jarring change);
5. the workspace's tone;
6. neutral.

Emotion only ever moves the voice towards more empathy than the baseline; speed and
volume always stay the workspace's (processors/emotion/voice_controls.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from call.voice_settings import TONES
from processors.emotion.state import EmotionSnapshot
from processors.emotion.steering import steering_rules

BURST_WINDOW_S = 5.0
BURST_CONFIDENCE = 0.5
PROSODY_SCORE = 0.25
SENSITIVE_TONE = "sympathetic"


class ToneLevel(IntEnum):
    BURST = 1
    PROSODY = 2
    SENSITIVE_TOPIC = 3
    MOMENTUM = 4
    WORKSPACE = 5
    NEUTRAL = 6


@dataclass(frozen=True)
class ToneChoice:
    tone: str
    level: ToneLevel
    why: str


def mentions_sensitive_topic(text: str, topics: Iterable[str]) -> str | None:
    """The first sensitive topic the text names (whole words, any case), or None."""
    lowered = text.lower()
    for topic in topics:
        if re.search(rf"\b{re.escape(topic.lower())}s?\b", lowered):
            return topic
    return None


def choose_tone(
    snapshot: EmotionSnapshot | None, *, now: float, upcoming_text: str,
    sensitive_topics: Iterable[str], previous: str | None, workspace_tone: str,
) -> ToneChoice:
    rules = steering_rules()
    if snapshot is not None:
        burst = snapshot.burst
        if (burst is not None and now - burst.at <= BURST_WINDOW_S
                and burst.confidence >= BURST_CONFIDENCE and burst.kind in rules.bursts):
            return ToneChoice(rules.bursts[burst.kind].tone, ToneLevel.BURST,
                              f"{burst.kind} ({rules.bursts[burst.kind].state})")
        if snapshot.steerable and snapshot.dominant_score >= PROSODY_SCORE:
            response = rules.response_for(snapshot.dominant, snapshot.valence, snapshot.arousal)
            return ToneChoice(response.tone, ToneLevel.PROSODY, snapshot.dominant)
    topic = mentions_sensitive_topic(upcoming_text, sensitive_topics)
    if topic is not None:
        return ToneChoice(SENSITIVE_TONE, ToneLevel.SENSITIVE_TOPIC, topic)
    if previous is not None:
        return ToneChoice(previous, ToneLevel.MOMENTUM, "last turn's tone")
    if workspace_tone in TONES:
        return ToneChoice(workspace_tone, ToneLevel.WORKSPACE, "workspace setting")
    return ToneChoice("neutral", ToneLevel.NEUTRAL, "no signal")
