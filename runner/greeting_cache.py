"""Pre-rendered greetings, keyed by voice and text, so the first words cost no TTS time.

Rendering happens while the phone rings (on the answer webhook) or once per process;
a call whose rendering is not ready in time falls back to live synthesis. Only the
local engine renders here: a cloud voice is synthesized live by its streaming service.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from loguru import logger

from processors.voice.greeting_player_processor import PrerenderedSpeech

if TYPE_CHECKING:
    from services.espeak.engine import TimedSpeech

# text, sample rate, speed → the audio and its word times (kept, so the greeting's words
# are recorded like any agent turn's)
Renderer = Callable[[str, int, float], Awaitable["TimedSpeech"]]

MAX_ENTRIES = 256


class GreetingCache:
    """A small LRU of rendered sentences with at most one render in flight per key."""

    def __init__(self, renderer: Renderer | None) -> None:
        self._renderer = renderer
        self._ready: OrderedDict[tuple[str, str, int], PrerenderedSpeech] = OrderedDict()
        self._pending: dict[tuple[str, str, int], asyncio.Task[PrerenderedSpeech | None]] = {}

    def warm(self, voice_key: str, text: str, sample_rate: int, speed: float = 1.0) -> None:
        """Start rendering in the background (no-op if cached, in flight or not renderable)."""
        key = (voice_key, text, sample_rate)
        if self._renderer is None or key in self._ready or key in self._pending:
            return
        task = asyncio.get_running_loop().create_task(self._render(key, speed))
        self._pending[key] = task
        task.add_done_callback(lambda _t: self._pending.pop(key, None))

    async def get(
        self, voice_key: str, text: str, sample_rate: int, *, timeout_s: float, speed: float = 1.0
    ) -> PrerenderedSpeech | None:
        """The rendering if it is (or becomes) ready within `timeout_s`, else None."""
        key = (voice_key, text, sample_rate)
        if key in self._ready:
            self._ready.move_to_end(key)
            return self._ready[key]
        self.warm(voice_key, text, sample_rate, speed)
        task = self._pending.get(key)
        if task is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            logger.info("greeting render not ready in time; synthesizing live")
            return None

    async def _render(self, key: tuple[str, str, int], speed: float) -> PrerenderedSpeech | None:
        _voice, text, sample_rate = key
        try:
            rendered = await self._renderer(text, sample_rate, speed)
        except Exception as error:  # a failed render only costs latency, never the greeting
            logger.warning(f"greeting render failed ({type(error).__name__}); synthesizing live")
            return None
        speech = PrerenderedSpeech.from_timed(text, rendered)
        self._ready[key] = speech
        while len(self._ready) > MAX_ENTRIES:
            self._ready.popitem(last=False)
        return speech
