"""The interface every emotion provider serves, cloud or local.

- audio: `connect()` once (it may raise `ProviderUnavailable`: bad key, billing, no
  answer: the call then goes on without audio emotion), `analyze(segment)` per 2 s
  segment, `close()`;
- text: `analyze(transcript)` per final transcript.
"""

from __future__ import annotations

from typing import Protocol

from services.emotion.reading import EmotionReading


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
