"""Speaks the greeting the moment the media stream starts, from pre-rendered audio.

Rendering the greeting while the phone rings (or once per process) removes TTS
latency from the first thing the caller hears. The player sits after the TTS
service and emits exactly what a TTS service would: started, audio, word-aligned
text, stopped, so the recorder, the context aggregator and the transport treat
the greeting like any other agent speech.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.frames.frames import (
    Frame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.utils.text.base_text_aggregator import TextType

from services.call_session import CallSession

CHUNK_MS = 40


@dataclass(frozen=True)
class PrerenderedSpeech:
    """A sentence already synthesized: PCM16 mono audio at `sample_rate`."""

    text: str
    sample_rate: int
    audio: bytes

    @property
    def duration_s(self) -> float:
        return len(self.audio) / 2 / self.sample_rate


class GreetingPlayer(FrameProcessor):
    """Plays the pre-rendered greeting right after the pipeline starts."""

    def __init__(self, session: CallSession, greeting: PrerenderedSpeech | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._greeting = greeting

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._greeting is not None:
            await self._play(self._greeting)

    async def _play(self, speech: PrerenderedSpeech) -> None:
        context_id = f"greeting-{self._session.call_id}"
        self._session.log.event("greeting", prerendered=True, duration_ms=int(speech.duration_s * 1000))
        await self.push_frame(TTSStartedFrame(context_id=context_id))
        if self._session.is_audio:
            step = speech.sample_rate * 2 * CHUNK_MS // 1000
            for offset in range(0, len(speech.audio), step):
                await self.push_frame(
                    TTSAudioRawFrame(
                        audio=speech.audio[offset : offset + step],
                        sample_rate=speech.sample_rate,
                        num_channels=1,
                        context_id=context_id,
                    )
                )
        text = TTSTextFrame(speech.text, text_type=TextType.SENTENCE, context_id=context_id)
        # Without audio the bot never "speaks", so RTVI would hold the words forever.
        text.skip_tts = not self._session.is_audio
        await self.push_frame(text)
        await self.push_frame(TTSStoppedFrame(context_id=context_id))
