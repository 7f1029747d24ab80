"""When the caller may cut the agent off: words, not voice activity alone.

Voice activity alone never interrupts the agent: a cough, breathing, an echo of the
agent's own voice or a noise in the room would. While the agent speaks, the caller
takes the floor only with recognised words and at least `min_speech_s` (0.5 s) of
speech, or — when the recogniser is slow to give words — with `fallback_s` (1.0 s) of
continuous speech. Shorter sounds, and short words like "mm-hm", leave the agent
talking.

Pure timing over a clock: the turn strategy reports speech and words and asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BargeIn = Literal["words", "sustained_speech"]

MIN_SPEECH_S = 0.5
FALLBACK_S = 1.0


@dataclass
class BargeInRule:
    min_speech_s: float = MIN_SPEECH_S
    fallback_s: float = FALLBACK_S
    started: float | None = None
    stopped: float | None = None
    words: bool = False

    def reset(self) -> None:
        self.started = self.stopped = None
        self.words = False

    def speech_started(self, now: float) -> None:
        self.started, self.stopped = now, None

    def speech_stopped(self, now: float) -> None:
        if self.started is not None:
            self.stopped = now

    def speech_s(self, now: float) -> float:
        if self.started is None:
            return 0.0
        return (self.stopped if self.stopped is not None else now) - self.started

    def heard_words(self, now: float) -> BargeIn | None:
        """Recognised words arrived (interim or final)."""
        self.words = True
        if self.started is None:  # words without voice activity: a typed or late line
            return "words"
        return "words" if self.speech_s(now) >= self.min_speech_s else None

    def tick(self, now: float) -> BargeIn | None:
        """What the speech so far calls for, checked while it goes on."""
        if self.started is None or self.stopped is not None:
            return None
        speaking = now - self.started
        if self.words and speaking >= self.min_speech_s:
            return "words"
        if speaking >= self.fallback_s:
            return "sustained_speech"
        return None
