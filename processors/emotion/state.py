"""One call's emotional state.

Readings from the providers land here: prosody (how the caller sounds, per 2 s audio
segment), language (what their words carry, per final transcript) and vocal bursts (a
laugh, a sigh). The state keeps the last 30 s of them and answers, at any moment:

- valence and arousal: each segment's score-weighted point (processors/emotion/
  dimensions), then recency-weighted *linearly* over the window — the newest segment
  weighs n, the oldest 1 — so the agent answers how the caller is now, not on average;
- the dominant emotion: the label with the highest recency-weighted score;
- which signal says what: the emotion and valence come from the voice when its provider
  hears them (Hume), else from the words — the offline analyzer measures only how
  activated the voice is (valence is barely recoverable from acoustics: Eyben et al.
  2016), so offline the words name the feeling and the voice gives its arousal;
- the trend: mean valence of the window's second half minus its first half
  (> 0.1 improving, < -0.1 deteriorating, else stable);
- coherence between voice and words: same valence sign 0.7–1.0 (closer is higher),
  opposite 0.0–0.3 (further apart is lower), either neutral 0.8, no language 1.0 (and
  no voice valence actually heard — the offline analyzer measures arousal only — 1.0);
  below 0.4 the caller may be masking how they feel;
- the latest burst, and behavioural signals (barge-ins, short replies, long silences).

Fewer than 2 segments: not enough to steer by (`steerable` is False).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from services.emotion.dimensions import EmotionTable, Point, emotion_table, point_of
from services.emotion.reading import EmotionReading, Source

WINDOW_S = 30.0
MIN_SEGMENTS = 2
TREND_DELTA = 0.1
NEUTRAL_VALENCE = 0.1  # |valence| below this is neither positive nor negative
MASKING_BELOW = 0.4
SHORT_REPLY_WORDS = 4
SILENCE_GAP_S = 5.0
class Trend(StrEnum):
    IMPROVING = "improving"
    DETERIORATING = "deteriorating"
    STABLE = "stable"


@dataclass(frozen=True)
class Segment:
    at: float
    point: Point
    scores: dict[str, float]  # canonical label → score
    valence_measured: bool = True


@dataclass(frozen=True)
class WordsTone:
    """What one transcript's language scoring said beyond its labels."""

    at: float
    sentiment_level: float | None
    toxicity: dict[str, float]


@dataclass(frozen=True)
class Burst:
    kind: str  # canonical burst type
    confidence: float
    at: float


@dataclass
class BehaviourSignals:
    barge_ins: int = 0
    short_reply_streak: int = 0
    long_silences: int = 0


@dataclass(frozen=True)
class EmotionSnapshot:
    """The state at one moment: what steering, tone and fillers read."""

    segments: int
    dominant: str | None
    dominant_score: float
    valence: float
    arousal: float
    trend: Trend
    coherence: float
    voice_valence: float | None
    words_valence: float | None
    words_dominant: str | None
    burst: Burst | None
    signals: BehaviourSignals
    words_sentiment: float | None = None  # recency-weighted sentiment level, 1..9
    toxicity: dict[str, float] = field(default_factory=dict)  # window maxima per category

    @property
    def steerable(self) -> bool:
        return self.segments >= MIN_SEGMENTS and self.dominant is not None

    @property
    def masking(self) -> bool:
        return self.coherence < MASKING_BELOW


def linear_weights(count: int) -> list[float]:
    """Recency weights for `count` segments, oldest first: 1, 2, ..., n."""
    return [float(i) for i in range(1, count + 1)]


def recency_mean(values: list[float]) -> float:
    weights = linear_weights(len(values))
    return sum(w * v for w, v in zip(weights, values, strict=True)) / sum(weights)


def trend_of(valences: list[float]) -> Trend:
    """Second half's mean valence against the first half's (an odd middle goes to neither)."""
    if len(valences) < 2:
        return Trend.STABLE
    half = len(valences) // 2
    first, second = valences[:half], valences[len(valences) - half:]
    delta = sum(second) / len(second) - sum(first) / len(first)
    if delta > TREND_DELTA:
        return Trend.IMPROVING
    if delta < -TREND_DELTA:
        return Trend.DETERIORATING
    return Trend.STABLE


def coherence_of(voice: float | None, words: float | None) -> float:
    """How well what the caller says agrees with how they sound, 0..1: high when voice and
    words lean the same way, low when they disagree, 0.8 when either is near neutral."""
    if voice is None or words is None:
        return 1.0  # no language results: agreement assumed
    if abs(voice) < NEUTRAL_VALENCE or abs(words) < NEUTRAL_VALENCE:
        return 0.8
    gap = abs(voice - words)  # 0..2
    if (voice > 0) == (words > 0):
        return round(1.0 - 0.3 * min(1.0, gap), 4)
    return round(0.3 * (1.0 - min(1.0, gap / 2)), 4)


def dominant_of(segments: list[Segment]) -> tuple[str | None, float]:
    """The label with the highest recency-weighted mean score across the segments."""
    if not segments:
        return None, 0.0
    weights = linear_weights(len(segments))
    totals: dict[str, float] = {}
    for weight, segment in zip(weights, segments, strict=True):
        for label, score in segment.scores.items():
            totals[label] = totals.get(label, 0.0) + weight * score
    label = max(totals, key=lambda name: (totals[name], name))
    return label, totals[label] / sum(weights)


class EmotionalState:
    """The rolling window of one call (not thread-safe: the event loop owns it)."""

    def __init__(
        self, *, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic,
        table: EmotionTable | None = None,
    ) -> None:
        self.window_s = window_s
        self.clock = clock
        self.table = table or emotion_table()
        self._voice: deque[Segment] = deque()
        self._words: deque[Segment] = deque()
        self.last_burst: Burst | None = None
        self.bursts: dict[str, int] = {}
        self.signals = BehaviourSignals()
        self.unknown_labels = 0
        self._words_tone: deque[WordsTone] = deque()
        self.toxicity_peaks: dict[str, float] = {}

    def add(self, reading: EmotionReading) -> None:
        if reading.source is Source.BURST:
            self._add_burst(reading)
            return
        if reading.source is Source.LANGUAGE:
            self._add_words_tone(reading)
        scores = {}
        for name, score in reading.scores.items():
            label = self.table.label(name)
            if label is None:
                self.unknown_labels += 1
            elif score > 0:
                scores[label] = max(score, scores.get(label, 0.0))
        point = point_of(scores, self.table)
        if point is None and reading.arousal is not None and reading.source is Source.PROSODY:
            point = Point(0.0, reading.arousal, 0.0)  # how activated, nothing more
        if point is None:
            return
        if reading.arousal is not None:
            point = replace(point, arousal=reading.arousal)
        target = self._voice if reading.source is Source.PROSODY else self._words
        measured = reading.valence_measured and bool(scores)
        target.append(Segment(reading.at, point, scores, measured))

    def _add_words_tone(self, reading: EmotionReading) -> None:
        if reading.sentiment_level is None and not reading.toxicity:
            return
        toxicity = dict(reading.toxicity or {})
        for category, score in toxicity.items():
            self.toxicity_peaks[category] = round(
                max(score, self.toxicity_peaks.get(category, 0.0)), 4)
        self._words_tone.append(WordsTone(reading.at, reading.sentiment_level, toxicity))

    def _add_burst(self, reading: EmotionReading) -> None:
        known = [(self.table.burst(n), s) for n, s in reading.scores.items()]
        known = [(kind, score) for kind, score in known if kind is not None and score > 0]
        if not known:
            return
        kind, score = max(known, key=lambda item: item[1])
        self.last_burst = Burst(kind, score, reading.at)
        self.bursts[kind] = self.bursts.get(kind, 0) + 1

    # --- behaviour -------------------------------------------------------------------

    def note_barge_in(self) -> None:
        self.signals.barge_ins += 1

    def note_reply(self, text: str) -> None:
        """A finished caller turn: a streak of very short replies may be withdrawal."""
        if len(text.split()) <= SHORT_REPLY_WORDS:
            self.signals.short_reply_streak += 1
        else:
            self.signals.short_reply_streak = 0

    def note_silence(self, gap_s: float) -> None:
        if gap_s >= SILENCE_GAP_S:
            self.signals.long_silences += 1

    # --- reading the state -----------------------------------------------------------

    def snapshot(self) -> EmotionSnapshot:
        now = self.clock()
        for window in (self._voice, self._words, self._words_tone):
            while window and now - window[0].at > self.window_s:
                window.popleft()
        voice, words = list(self._voice), list(self._words)
        levels = [t.sentiment_level for t in self._words_tone if t.sentiment_level is not None]
        toxicity: dict[str, float] = {}
        for tone in self._words_tone:
            for category, score in tone.toxicity.items():
                toxicity[category] = max(score, toxicity.get(category, 0.0))
        heard = [s for s in voice if s.valence_measured]
        # Which emotion and how pleasant: the voice when its provider hears that (Hume);
        # else the words (the offline analyzer measures only how activated the voice is).
        feeling = heard or words
        # How activated: the voice whenever there is one.
        activation = voice or words
        dominant, score = dominant_of(feeling)
        voice_valence = recency_mean([s.point.valence for s in heard]) if heard else None
        words_valence = recency_mean([s.point.valence for s in words]) if words else None
        valences = [s.point.valence for s in feeling]
        return EmotionSnapshot(
            segments=max(len(voice), len(words)),
            dominant=dominant,
            dominant_score=round(score, 4),
            valence=round(recency_mean(valences), 4) if valences else 0.0,
            arousal=round(recency_mean([s.point.arousal for s in activation]), 4)
            if activation else 0.0,
            trend=trend_of(valences),
            coherence=coherence_of(voice_valence, words_valence),
            voice_valence=voice_valence,
            words_valence=words_valence,
            words_dominant=dominant_of(words)[0],
            burst=self.last_burst,
            signals=BehaviourSignals(**vars(self.signals)),
            words_sentiment=round(recency_mean(levels), 3) if levels else None,
            toxicity=toxicity,
        )


@dataclass
class EmotionalSummary:
    """What the call record keeps at the end (built by the emotion processors)."""

    trajectory: list[dict] = field(default_factory=list)  # per turn: at_s, dominant, valence
    dominant_counts: dict[str, int] = field(default_factory=dict)
    trend_changes: list[dict] = field(default_factory=list)
    coherence_alerts: int = 0
    bursts: dict[str, int] = field(default_factory=dict)
    provider_health: dict[str, str] = field(default_factory=dict)
    dropped_segments: int = 0
    toxicity_peaks: dict[str, float] = field(default_factory=dict)
