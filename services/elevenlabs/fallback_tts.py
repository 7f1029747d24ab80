"""ElevenLabs' streaming voice that never leaves the caller in silence.

Pipecat's `ElevenLabsTTSService` reconnects a dropped stream, but the sentence it was
speaking is lost with the old connection, a first byte that never comes leaves the turn
silent, and one message that is not JSON tears the stream down. Around it (Pipecat's
connection, protocol and playback unchanged):

- **Drop mid-sentence**: the words the stream had not voiced are kept; if the stream
  is back within `reconnect_wait_s` ElevenLabs finishes the sentence from the first
  unheard word (`tts_resumed`), else the local voice (eSpeak NG) says it
  (`tts_fallback`, reason `drop`). Sentences queued meanwhile follow in order.
- **Slow first byte**: a sentence with no audio `first_byte_timeout_s` after it was
  sent is said by the local voice instead (`tts_slow_first_byte`, `tts_fallback`); three
  in a row and the local voice keeps the rest of the call.
- **Malformed message**: skipped (`tts_malformed`); several in a row count as a drop.
- **Reconnect tries spent** (Pipecat's three, 0.25-1 s apart): the local voice speaks
  for the rest of the call (`tts_failed`, `tts_fallback` scope `call`).

Every reconnect try is `tts_reconnect` in the call record.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace

from loguru import logger
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
from websockets.protocol import State

from services.espeak.engine import DEFAULT_VOICE, DEFAULT_WORDS_PER_MINUTE, synthesize_pcm
from services.provider_faults import (
    FaultSink,
    ignore_faults,
    screened_elevenlabs,
    unspoken_words,
)

FIRST_BYTE_TIMEOUT_S = 1.5
RECONNECT_WAIT_S = 1.0
SLOW_IN_A_ROW = 3  # then the local voice keeps the call
UNAVAILABLE_IN_A_ROW = 3
MALFORMED_IN_A_ROW = 5  # then the stream counts as dropped
MALFORMED_EVENTS = 5  # recorded per call; more are counted in the log only
LOCAL_CHUNK_S = 0.1


@dataclass(frozen=True)
class LocalVoice:
    """The offline voice a sentence falls back to."""

    voice: str = DEFAULT_VOICE
    words_per_minute: int = DEFAULT_WORDS_PER_MINUTE


class _MalformedStream(ConnectionError):
    """The stream keeps sending what does not parse: reopen it."""


class _Screened:
    """The websocket as the receive loop reads it: messages that do not follow the
    protocol are reported and skipped; everything else is the websocket itself."""

    def __init__(self, websocket, on_malformed) -> None:
        self._websocket = websocket
        self._on_malformed = on_malformed

    def __getattr__(self, name: str):
        return getattr(self._websocket, name)

    async def __aiter__(self):
        in_a_row = 0
        async for message in self._websocket:
            if screened_elevenlabs(message) is None:
                in_a_row += 1
                self._on_malformed()
                if in_a_row >= MALFORMED_IN_A_ROW:
                    raise _MalformedStream(f"{in_a_row} malformed messages in a row")
                continue
            in_a_row = 0
            yield message


class FallbackElevenLabsTTSService(ElevenLabsTTSService):
    """`ElevenLabsTTSService` whose sentences are finished, by it or by the local voice."""

    def __init__(
        self, *, local_voice: LocalVoice | None = None,
        first_byte_timeout_s: float = FIRST_BYTE_TIMEOUT_S,
        reconnect_wait_s: float = RECONNECT_WAIT_S, faults: FaultSink = ignore_faults, **kwargs,
    ) -> None:
        kwargs.setdefault("reconnect_backoff_min_wait", 0.25)
        kwargs.setdefault("reconnect_backoff_max_wait", 1.0)
        # Silent contexts are this class's to answer (the local voice), not a reason for
        # Pipecat to write the service off.
        kwargs.setdefault("max_consecutive_zero_audio_contexts", 0)
        super().__init__(**kwargs)
        self._local_voice = local_voice or LocalVoice()
        self._first_byte_timeout_s = first_byte_timeout_s
        self._reconnect_wait_s = reconnect_wait_s
        self._faults = faults
        self._sent: dict[str, list[str]] = {}  # contexts ElevenLabs holds: the text sent
        self._voiced: dict[str, int] = {}  # ... and how many of its words it has voiced
        self._heard: set[str] = set()  # contexts whose first audio arrived
        self._local: set[str] = set()  # contexts the local voice speaks
        self._done: set[str] = set()  # contexts whose turn has ended
        self._pending: list[tuple[str, str]] = []  # (context, text) held through an outage
        self._watches: dict[str, asyncio.Task] = {}
        self._finisher: asyncio.Task | None = None
        self._finishing = False
        self._outage = False
        self._back = asyncio.Event()
        self._local_only = False
        self._local_lock = asyncio.Lock()
        self._slow_in_a_row = 0
        self._unavailable_in_a_row = 0
        self._malformed = 0

    # --- Synthesis ----------------------------------------------------------------------

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        if self._outage or self._finishing or self._pending:
            # Held in order behind the sentence the outage cut off.
            if not self.audio_context_available(context_id):
                await self.create_audio_context(context_id)
                yield TTSStartedFrame(context_id=context_id)
            self._pending.append((context_id, text))
            self._finish_soon()
            return
        if self._local_only or context_id in self._local:
            self._local.add(context_id)
            async for frame in self._spoken_locally(text, context_id):
                yield frame
            return
        opened = not self.audio_context_available(context_id)
        failed = False
        async for frame in super().run_tts(text, context_id):
            failed = failed or isinstance(frame, ErrorFrame)
            yield frame
        if failed:
            self._unavailable_in_a_row += 1
            self._faults("tts_fallback", reason="unavailable", scope="sentence",
                         words=len(text.split()))
            if self._unavailable_in_a_row >= UNAVAILABLE_IN_A_ROW:
                self._keep_local_voice("unavailable")
            self._local.add(context_id)
            async for frame in self._spoken_locally(text, context_id):
                yield frame
            return
        self._unavailable_in_a_row = 0
        self._sent.setdefault(context_id, []).append(text)
        if opened:
            self._watch_first_byte(context_id)

    async def _spoken_locally(self, text: str, context_id: str
                              ) -> AsyncGenerator[Frame | None, None]:
        async with self._local_lock:
            if not self.audio_context_available(context_id):
                await self.create_audio_context(context_id)
                yield TTSStartedFrame(context_id=context_id)
            for frame in await self._local_audio(text, context_id):
                yield frame

    async def _local_audio(self, text: str, context_id: str) -> list[TTSAudioRawFrame]:
        """`text` in the local voice, as frames of the context."""
        try:
            pcm = await synthesize_pcm(text, self.sample_rate, voice=self._local_voice.voice,
                                       words_per_minute=self._local_voice.words_per_minute)
        except Exception as error:  # noqa: BLE001 - nothing else is left to speak with
            logger.error(f"{self}: the local voice failed too ({type(error).__name__})")
            return []
        step = int(LOCAL_CHUNK_S * self.sample_rate) * 2
        return [TTSAudioRawFrame(pcm[i:i + step], self.sample_rate, 1, context_id=context_id)
                for i in range(0, len(pcm), step)]

    async def _say_in(self, context_id: str, text: str) -> None:
        """Append `text` in the local voice to a context that is already open."""
        async with self._local_lock:
            for frame in await self._local_audio(text, context_id):
                await self.append_to_audio_context(context_id, frame)

    async def _end_local(self, context_id: str) -> None:
        """A context the local voice spoke is complete: stop it like ElevenLabs would."""
        self._local.discard(context_id)
        self._done.discard(context_id)
        if self.audio_context_available(context_id):
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)

    def _keep_local_voice(self, reason: str) -> None:
        if not self._local_only:
            self._local_only = True
            logger.warning(f"{self}: the local voice speaks for the rest of the call ({reason})")
            self._faults("tts_fallback", reason=reason, scope="call")

    async def on_turn_context_completed(self) -> None:
        context_id = self._turn_context_id
        ours = context_id in self._local or any(c == context_id for c, _ in self._pending)
        if context_id is None or not ours:
            await super().on_turn_context_completed()
            return
        self._done.add(context_id)
        self._turn_context_id = None
        if not any(c == context_id for c, _ in self._pending):
            async with self._local_lock:
                await self._end_local(context_id)

    # --- What arrives from ElevenLabs ----------------------------------------------------

    def _get_websocket(self):
        return _Screened(super()._get_websocket(), self._note_malformed)

    def _note_malformed(self) -> None:
        self._malformed += 1
        logger.warning(f"{self}: skipped a malformed message ({self._malformed} this call)")
        if self._malformed <= MALFORMED_EVENTS:
            self._faults("tts_malformed", count=self._malformed)

    async def append_to_audio_context(self, context_id: str | None, frame) -> None:
        if (isinstance(frame, TTSAudioRawFrame) and context_id in self._sent
                and context_id not in self._heard):
            self._heard.add(context_id)
            self._slow_in_a_row = 0
            watch = self._watches.pop(context_id, None)
            if watch is not None:
                watch.cancel()
        await super().append_to_audio_context(context_id, frame)

    async def add_word_timestamps(self, word_times, context_id=None, *args, **kwargs) -> None:
        if context_id in self._sent:
            self._voiced[context_id] = self._voiced.get(context_id, 0) + len(word_times)
        await super().add_word_timestamps(word_times, context_id, *args, **kwargs)

    # --- A first byte that does not come ----------------------------------------------

    def _watch_first_byte(self, context_id: str) -> None:
        self._watches[context_id] = self.create_task(
            self._await_first_byte(context_id), f"{self}::first-byte")

    async def _await_first_byte(self, context_id: str) -> None:
        await asyncio.sleep(self._first_byte_timeout_s)
        self._watches.pop(context_id, None)
        if (context_id in self._heard or context_id not in self._sent
                or not self.audio_context_available(context_id) or self._outage):
            return
        self._faults("tts_slow_first_byte", after_ms=int(self._first_byte_timeout_s * 1000))
        texts = self._sent.pop(context_id)
        self._voiced.pop(context_id, None)
        try:
            await self._close_context(context_id)
        except Exception as error:  # noqa: BLE001 - ElevenLabs may be gone; the local voice is not
            logger.debug(f"{self}: could not close the slow context ({type(error).__name__})")
        async with self._local_lock:
            local = await self._continue_in_new_context(context_id)
            self._local.add(local)
            text = " ".join(texts)
            self._faults("tts_fallback", reason="slow_first_byte", scope="sentence",
                         words=len(text.split()))
            for frame in await self._local_audio(text, local):
                await self.append_to_audio_context(local, frame)
            if local in self._done:
                await self._end_local(local)
        self._slow_in_a_row += 1
        if self._slow_in_a_row >= SLOW_IN_A_ROW:
            self._keep_local_voice("slow_first_byte")

    async def _continue_in_new_context(self, context_id: str) -> str:
        """A new context queued to play where `context_id` left off (which ends now); it
        carries on the turn if `context_id` was the turn's."""
        new_id = str(uuid.uuid4())
        spec = self._tts_contexts.get(context_id)
        if spec is not None:
            self._tts_contexts[new_id] = replace(spec)
        await self.create_audio_context(new_id)
        await self.remove_audio_context(context_id)
        if self._turn_context_id == context_id:
            self._turn_context_id = new_id
        else:
            self._done.add(new_id)
        return new_id

    # --- A dropped stream -----------------------------------------------------------------

    async def _reconnect_websocket(self, attempt_number: int) -> bool:
        self._faults("tts_reconnect", attempt=attempt_number)
        self._outage = True
        reconnected = await super()._reconnect_websocket(attempt_number)
        if reconnected:
            self._outage = False
            self._back.set()
        return reconnected

    async def _close_connection_contexts(self) -> None:
        """End only the contexts the lost connection was speaking (the local voice's play
        on); on a drop, what they had not voiced yet is held to be finished."""
        held = [c for c in self.get_audio_contexts() if c in self._sent]
        for context_id in held:
            text = " ".join(self._sent.pop(context_id))
            rest = unspoken_words(text, self._voiced.pop(context_id, 0)) if self._outage else ""
            watch = self._watches.pop(context_id, None)
            if watch is not None:
                watch.cancel()
            if rest:
                self._pending.append((await self._continue_in_new_context(context_id), rest))
                self._finish_soon()
            else:
                await self.remove_audio_context(context_id)
                if self._turn_context_id == context_id:
                    self._turn_context_id = None
                    self._turn_context_id = self.create_context_id()

    async def _report_error(self, error: ErrorFrame, force_treat_as_permanent: bool = False):
        if not force_treat_as_permanent:
            await super()._report_error(error)
            return
        # The tries are spent: the local voice carries the call, so the service is not
        # written off (that would leave the caller in silence).
        self._faults("tts_failed", error=str(error.error)[:120])
        self._keep_local_voice("failed")
        self._outage = False
        self._back.set()
        await self._call_event_handler("on_connection_error", error.error)
        await self.push_error_frame(error)

    def _finish_soon(self) -> None:
        if self._finisher is None or self._finisher.done():
            self._finishing = True
            self._finisher = self.create_task(self._finish_outage(), f"{self}::finish")

    async def _finish_outage(self) -> None:
        """What the outage held is said, in order: by ElevenLabs if it is back within
        `reconnect_wait_s`, else by the local voice."""
        try:
            deadline = time.monotonic() + self._reconnect_wait_s
            self._back.clear()
            while self._outage and (left := deadline - time.monotonic()) > 0:
                for context_id, _ in self._pending:
                    self._refresh_audio_context(context_id)  # playback keeps waiting for it
                try:
                    await asyncio.wait_for(self._back.wait(), min(left, 0.25))
                except TimeoutError:
                    pass
            websocket = self._websocket
            provider = (not self._outage and not self._local_only and websocket is not None
                        and websocket.state is State.OPEN)
            words = 0
            while self._pending:
                context_id, text = self._pending.pop(0)
                if not self.audio_context_available(context_id):
                    continue  # the caller barged in meanwhile
                if provider and not await self._resend(context_id, text):
                    provider = False  # lost again: the local voice says the rest
                if not provider:
                    await self._say_held(context_id, text)
                words += len(text.split())
                if context_id in self._done and all(c != context_id for c, _ in self._pending):
                    self._done.discard(context_id)
                    if provider:
                        await self._close_context(context_id)
                    else:
                        async with self._local_lock:
                            await self._end_local(context_id)
            self._finishing = False  # nothing is held, and nothing can be until this returns
            if words and provider:
                self._faults("tts_resumed", words=words)
            elif words:
                self._faults("tts_fallback", reason="drop", scope="sentence", words=words)
        finally:
            self._finishing = False

    async def _resend(self, context_id: str, text: str) -> bool:
        """Send held text on the reopened stream (opening its context there first);
        False if the stream failed again."""
        opened = context_id not in self._sent
        try:
            if opened:
                await self._send_context_init(context_id)
            await self._send_text(text, context_id)
        except Exception as error:  # noqa: BLE001 - the receive loop sees the drop too
            logger.warning(f"{self}: resending failed ({type(error).__name__})")
            self._sent.pop(context_id, None)
            return False
        self._sent.setdefault(context_id, []).append(text)
        if opened:
            self._watch_first_byte(context_id)
        return True

    async def _say_held(self, context_id: str, text: str) -> None:
        self._local.add(context_id)
        await self._say_in(context_id, text)

    # --- Barge-in ---------------------------------------------------------------------------

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        self._pending = [(c, t) for c, t in self._pending if c != context_id]
        self._local.discard(context_id)
        self._done.discard(context_id)
        watch = self._watches.pop(context_id, None)
        if watch is not None:
            watch.cancel()
        if context_id in self._sent:
            self._sent.pop(context_id)
            self._voiced.pop(context_id, None)
            await super().on_audio_context_interrupted(context_id)
        else:
            self._reset_alignment_state(context_id)
