"""Emotion providers: one for audio (prosody + bursts), one for words (language).

Each has a cloud and a local implementation behind the same small interface, so the
tap (processors/emotion/emotion_tap.py) neither knows nor cares which it talks to:

- audio: `connect()` once (it may raise `ProviderUnavailable`: bad key, billing, no
  answer — the call then goes on without audio emotion), `analyze(segment)` per 2 s
  segment, `close()`;
- text: `analyze(transcript)` per final transcript.

Offline (the default): `LocalAudioProvider` (signal prosody) and `LocalTextProvider`
(VADER + rules). Cloud: Hume's realtime Expression Measurement (services/hume/emotion.py)
and the fast LLM (services/llm/emotion.py).
"""

from __future__ import annotations

from typing import Protocol

from services.prosody.emotion import ProsodyPool, may_hold_speech
from services.vader.emotion import LocalTextAnalyzer
from processors.emotion.state import EmotionReading, Source


class ProviderUnavailable(RuntimeError):
    """The provider cannot serve this call at all (auth, billing, unreachable)."""


class AudioEmotionProvider(Protocol):
    name: str

    async def connect(self) -> None: ...

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        """Readings for one segment of caller audio; what arrived since the last call for
        a streaming provider (possibly none). Raises on a failure (the breaker counts it)."""

    async def close(self) -> None: ...


class TextEmotionProvider(Protocol):
    name: str

    async def analyze(self, text: str, *, at: float) -> list[EmotionReading]: ...


class LocalAudioProvider:
    """Signal prosody in the shared analyzer process (`ProsodyPool`): how activated the
    caller sounds, nothing more."""

    name = "local"

    def __init__(self, pool: ProsodyPool | None = None) -> None:
        self._pool = pool or ProsodyPool.shared()

    async def connect(self) -> None:
        return None

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        if not may_hold_speech(pcm, sample_rate):
            return []  # silence: nothing to hear, and no trip to the analyzer
        arousal = await self._pool.arousal(pcm, sample_rate)
        if arousal is None:
            return []
        return [EmotionReading(Source.PROSODY, {}, at, provider=self.name,
                               valence_measured=False, arousal=arousal)]

    async def close(self) -> None:
        return None


class LocalTextProvider:
    """VADER and phrase rules: well under a millisecond, so it runs inline."""

    name = "local"

    def __init__(self) -> None:
        self._analyzer = LocalTextAnalyzer()

    async def analyze(self, text: str, *, at: float) -> list[EmotionReading]:
        return self._analyzer.analyze(text, at=at)


def load_emotion_data() -> None:
    """Load what the emotion layers read (tables, rules, the VADER lexicon) before the
    first call, so no caller's first words wait on a file read and its validation."""
    from processors.emotion.dimensions import emotion_table
    from processors.emotion.fillers import filler_set
    from processors.emotion.steering import steering_rules
    from processors.emotion.voice_controls import voice_tones

    emotion_table(), steering_rules(), filler_set(), voice_tones()
    LocalTextAnalyzer().analyze("warming up, thank you", at=0.0)
