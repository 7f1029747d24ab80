"""What an emotion provider reports: label scores for one segment of audio or one transcript."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# Hume's language-model toxicity categories (the cloud text provider scores them).
TOXICITY_CATEGORIES = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")


class Source(StrEnum):
    PROSODY = "prosody"
    LANGUAGE = "language"
    BURST = "burst"


@dataclass(frozen=True)
class EmotionReading:
    """One provider result: label scores (0..1) for one audio segment or transcript.

    For bursts the labels are burst types (Laugh, Sigh, ...), not emotions.
    """

    source: Source
    scores: dict[str, float]
    at: float  # monotonic seconds: when the segment ended
    provider: str = ""
    valence_measured: bool = True  # False: the labels' valence was not heard (local audio)
    arousal: float | None = None  # measured directly (0..1), instead of the labels' mean
    # Language only: P(level) for sentiment levels 1 (most negative) .. 9 (most positive),
    # and toxicity per category (0..1), when the provider gives them.
    sentiment: tuple[float, ...] | None = None
    toxicity: dict[str, float] | None = None

    @property
    def sentiment_level(self) -> float | None:
        """The expected sentiment level, 1..9 (5 is neutral)."""
        if not self.sentiment:
            return None
        return sum(level * p for level, p in enumerate(self.sentiment, start=1))
