"""Pre-rendered greetings, keyed by voice and text, so the first words cost no TTS time.

Rendering happens while the phone rings (on the answer webhook). With several worker
processes each rendering is also kept on disk (`runner/greeting_store.py`), where a call
whose media stream reached another worker process than its answer finds it. A call whose rendering
is not ready in time (here, or from the other process) falls back to live synthesis.
Only the local engine renders here: a cloud voice is synthesized live by its streaming
service.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from loguru import logger

from processors.voice.greeting_player_processor import PrerenderedSpeech
from runner.greeting_store import GreetingKey, GreetingStore

if TYPE_CHECKING:
    from services.espeak.engine import TimedSpeech

# text, sample rate, speed → the audio and its word times (kept, so the greeting's words
# are recorded like any agent turn's)
Renderer = Callable[[str, int, float], Awaitable["TimedSpeech"]]

MAX_ENTRIES = 256
# While waiting for a rendering, how often the disk is looked at for another process's.
STORE_POLL_S = 0.005


class GreetingCache:
    """A small LRU of rendered sentences with at most one render in flight per key,
    backed by the machine's `GreetingStore` (None: this process's memory only)."""

    def __init__(self, renderer: Renderer | None, store: GreetingStore | None = None) -> None:
        self._renderer = renderer
        self._store = store
        self._ready: OrderedDict[GreetingKey, PrerenderedSpeech] = OrderedDict()
        self._pending: dict[GreetingKey, asyncio.Task[PrerenderedSpeech | None]] = {}

    def warm(self, voice_key: str, text: str, sample_rate: int, speed: float = 1.0) -> None:
        """Start rendering in the background (no-op if cached here or on disk, in flight or
        not renderable)."""
        key = (voice_key, text, sample_rate)
        if self._renderer is None or key in self._ready or key in self._pending:
            return
        if self._stored(key) is not None:
            return
        task = asyncio.get_running_loop().create_task(self._render(key, speed))
        self._pending[key] = task
        task.add_done_callback(lambda _t: self._pending.pop(key, None))

    async def get(
        self, voice_key: str, text: str, sample_rate: int, *, timeout_s: float, speed: float = 1.0
    ) -> PrerenderedSpeech | None:
        """The rendering if it is (or becomes) ready within `timeout_s`, here or on disk
        from another process, else None."""
        key = (voice_key, text, sample_rate)
        if key in self._ready:
            self._ready.move_to_end(key)
            return self._ready[key]
        self.warm(voice_key, text, sample_rate, speed)
        if key in self._ready:  # found on disk
            return self._ready[key]
        task = self._pending.get(key)
        if task is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (left := deadline - loop.time()) > 0:
            done, _ = await asyncio.wait({task}, timeout=min(left, STORE_POLL_S))
            if done:
                return task.result()
            if (stored := self._stored(key)) is not None:  # another process finished first
                return stored
        logger.info("greeting render not ready in time; synthesizing live")
        return None

    def _stored(self, key: GreetingKey) -> PrerenderedSpeech | None:
        """The rendering on disk, kept in memory from then on (None: not there)."""
        if self._store is None:
            return None
        speech = self._store.load(key)
        if speech is not None:
            self._keep(key, speech)
        return speech

    def _keep(self, key: GreetingKey, speech: PrerenderedSpeech) -> None:
        self._ready[key] = speech
        while len(self._ready) > MAX_ENTRIES:
            self._ready.popitem(last=False)

    async def _render(self, key: GreetingKey, speed: float) -> PrerenderedSpeech | None:
        _voice, text, sample_rate = key
        try:
            rendered = await self._renderer(text, sample_rate, speed)
        except Exception as error:  # a failed render only costs latency, never the greeting
            logger.warning(f"greeting render failed ({type(error).__name__}); synthesizing live")
            return None
        speech = PrerenderedSpeech.from_timed(text, rendered)
        self._keep(key, speech)
        if self._store is not None:  # in a thread, not waited for: it never raises
            asyncio.get_running_loop().run_in_executor(None, self._store.save, key, speech)
        return speech
