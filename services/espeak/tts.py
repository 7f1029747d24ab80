"""Offline text-to-speech for Pipecat: eSpeak NG streamed as audio with word timestamps.

The engine lives in services/espeak/engine.py; this module only adapts it to Pipecat's
``TTSService``: audio crosses from the engine thread to the event loop as it is
made, is resampled to the pipeline's rate (8 kHz on phone calls), and every word
eSpeak reports becomes a timed ``TTSTextFrame`` — the same shape ElevenLabs
produces, so the assistant context only keeps words that were actually played.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from loguru import logger
from pipecat.audio.utils import create_stream_resampler
from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language, resolve_language
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, NotGiven, is_given

from services.espeak.engine import (
    DEFAULT_PITCH,
    DEFAULT_VOICE,
    DEFAULT_WORDS_PER_MINUTE,
    EspeakEngine,
    SynthesisChunk,
    VoiceShape,
)

# Same range as ElevenLabs' speed, so a workspace's voice speed means the same on both.
MIN_SPEED = 0.7
MAX_SPEED = 1.2

# eSpeak voice names for the languages a clinic is likely to configure.
_LANGUAGE_VOICES: dict[Language, str] = {
    Language.EN: "en-us",
    Language.EN_US: "en-us",
    Language.EN_GB: "en-gb",
    Language.ES: "es",
    Language.FR: "fr-fr",
    Language.DE: "de",
    Language.IT: "it",
    Language.PT: "pt",
    Language.PT_BR: "pt-br",
}


@dataclass
class EspeakTTSSettings(TTSSettings):
    """Runtime-updatable settings for :class:`EspeakTTSService`.

    Parameters:
        voice: eSpeak voice name (``"en-us"``, ``"en-gb"``...). Wins over ``language``.
        speed: Speaking-rate multiplier, 0.7-1.2, applied to the base words per minute.
        volume: Loudness multiplier, 0-2 (the workspace's; 1.0 is eSpeak's normal).
        pitch: Base pitch, 0-100 (eSpeak's scale; 50 is its default): the voice tone.
        pitch_range: Pitch range, 0 (monotone) to 100 (expressive): the voice tone.
    """

    speed: float | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    volume: float | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    pitch: int | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    pitch_range: int | NotGiven = field(default_factory=lambda: NOT_GIVEN)


# Marks the end of an utterance in the queue from the engine thread.
_DONE = object()


def words_per_minute_for(speed: float, base_words_per_minute: int) -> int:
    """Speed multiplier (clamped to 0.7-1.2) to an eSpeak rate."""
    clamped = max(MIN_SPEED, min(MAX_SPEED, float(speed)))
    return int(round(base_words_per_minute * clamped))


class EspeakTTSService(TTSService):
    """Local TTS on eSpeak NG: streamed PCM, word-timed text frames, no network.

    Example::

        tts = EspeakTTSService(settings=EspeakTTSService.Settings(voice="en-us", speed=1.0))
    """

    Settings = EspeakTTSSettings
    _settings: EspeakTTSSettings

    def __init__(
        self,
        *,
        settings: EspeakTTSSettings | None = None,
        base_words_per_minute: int = DEFAULT_WORDS_PER_MINUTE,
        engine: EspeakEngine | None = None,
        **kwargs,
    ):
        """Create the service.

        Args:
            settings: Voice, speed and language; unset fields keep their defaults.
            base_words_per_minute: eSpeak rate at speed 1.0.
            engine: The eSpeak engine; the process-wide one by default.
            **kwargs: Passed to ``TTSService`` (e.g. ``sample_rate``).
        """
        default_settings = self.Settings(
            model=None, voice=DEFAULT_VOICE, language=Language.EN, speed=1.0, volume=1.0,
            pitch=None, pitch_range=None,  # None: eSpeak's own (a voice tone sets them)
        )
        if settings is not None:
            default_settings.apply_update(settings)
        # Word frames come from eSpeak's word events, so the base class must not
        # also push each sentence as one TTSTextFrame (push_text_frames=False).
        super().__init__(
            push_text_frames=False,
            push_start_frame=True,
            push_stop_frames=True,
            settings=default_settings,
            **kwargs,
        )
        self._base_words_per_minute = base_words_per_minute
        self._engine = engine or EspeakEngine.shared()
        # Seconds of audio already produced per audio context: a turn's sentences
        # share one context, and word times count from the start of its audio.
        self._context_offsets: dict[str, float] = {}

    def can_generate_metrics(self) -> bool:
        """TTFB, processing and usage metrics are all meaningful here."""
        return True

    def language_to_service_language(self, language: Language) -> str:
        """A Pipecat language to the eSpeak voice that speaks it."""
        return resolve_language(language, _LANGUAGE_VOICES, use_base_code=True)

    def _voice(self) -> str:
        voice = self._settings.voice
        if is_given(voice) and voice:
            return str(voice)
        language = self._settings.language
        if is_given(language) and language:
            return str(language)
        return DEFAULT_VOICE

    def _shape(self) -> VoiceShape:
        settings = self._settings

        def given(value, default):
            return value if is_given(value) and value is not None else default

        return VoiceShape(
            pitch=int(given(settings.pitch, DEFAULT_PITCH)),
            range=int(given(settings.pitch_range, 50)),
            volume=int(round(100 * float(given(settings.volume, 1.0)))),
        )

    def _words_per_minute(self) -> int:
        speed = self._settings.speed if is_given(self._settings.speed) else 1.0
        if speed is None:
            speed = 1.0
        return words_per_minute_for(speed, self._base_words_per_minute)

    async def on_audio_context_completed(self, context_id: str):
        """Forget the context's audio offset once it has played."""
        self._context_offsets.pop(context_id, None)

    async def on_audio_context_interrupted(self, context_id: str):
        """Forget the context's audio offset when the caller barges in."""
        self._context_offsets.pop(context_id, None)

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
        """Synthesize on the engine thread and yield audio as each chunk arrives."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def hand_over(item: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # loop closed under us: nobody is listening any more
                stop.set()

        def on_chunk(chunk: SynthesisChunk) -> None:
            if not stop.is_set():
                hand_over(chunk)

        native_rate = self._engine.native_sample_rate
        offset = self._context_offsets.get(context_id, 0.0)
        produced_samples = 0
        resampler = create_stream_resampler(clear_after_secs=None)
        try:
            await self.start_tts_usage_metrics(text)
            future = self._engine.start_synthesis(
                text,
                voice=self._voice(),
                words_per_minute=self._words_per_minute(),
                shape=self._shape(),
                on_chunk=on_chunk,
                should_stop=stop.is_set,
            )
            future.add_done_callback(lambda _f: hand_over(_DONE))
            while (item := await queue.get()) is not _DONE:
                assert isinstance(item, SynthesisChunk)
                if item.words:
                    await self.add_word_timestamps(
                        [(w.word, offset + w.start_s) for w in item.words], context_id
                    )
                if item.audio:
                    await self.stop_ttfb_metrics()
                    produced_samples += len(item.audio) // 2
                    audio = await resampler.resample(item.audio, native_rate, self.sample_rate)
                    if audio:
                        yield TTSAudioRawFrame(audio, self.sample_rate, 1, context_id=context_id)
            future.result()  # re-raises an engine error
            tail = await resampler.flush()
            if tail:
                yield TTSAudioRawFrame(tail, self.sample_rate, 1, context_id=context_id)
            self._context_offsets[context_id] = offset + produced_samples / native_rate
        except asyncio.CancelledError:
            stop.set()
            raise
        except Exception as e:
            logger.warning(f"{self}: eSpeak synthesis failed: {type(e).__name__}")
            yield ErrorFrame(error=f"eSpeak synthesis failed: {e}")
        finally:
            stop.set()
            await self.stop_ttfb_metrics()
