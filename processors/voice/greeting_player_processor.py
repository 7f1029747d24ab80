"""Speaks the greeting the moment the media stream starts, from pre-rendered audio.

Rendering the greeting while the phone rings (or once per process) removes TTS
latency from the first thing the caller hears. The player sits after the TTS
service and emits exactly what a TTS service would: started, audio, word-aligned
text, stopped, so the recorder, the context aggregator and the transport treat
the greeting like any other agent speech. A greeting rendered with word times
(eSpeak's word events, `services.espeak.engine.synthesize_timed`) is spoken as timed word
frames, `pts` = when the word's audio plays on the pipeline clock, as the live TTS
stamps them, so the recorder stores the greeting's words like any agent turn's. They
are timed from the transport's `BotStartedSpeakingFrame` (it comes back upstream the
moment the first chunk is played), not from the push: at the start of a call the
transport is still starting up and plays the greeting some 80 ms after it arrives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.utils.text.base_text_aggregator import TextType

from call.call_session import CallSession

if TYPE_CHECKING:
    from services.espeak.engine import TimedSpeech

CHUNK_MS = 40

TimedWord = tuple[str, float]  # a written word, its start in seconds from the audio's start


def timed_words(text: str, starts: Iterable[tuple[int, float]]) -> tuple[TimedWord, ...]:
    """The text as timed words, from (character offset, start s) of each word the engine
    reported. Every character of the text lands in exactly one word (a token the engine
    did not report, a dash say, rides with the word before it), so the words joined by
    spaces are the text as the caller heard it; times only move forward."""
    ordered: list[tuple[int, float]] = []
    for offset, start_s in sorted(starts):
        if 0 <= offset < len(text) and (not ordered or offset > ordered[-1][0]):
            ordered.append((offset, max(start_s, ordered[-1][1] if ordered else 0.0)))
    words: list[TimedWord] = []
    for index, (offset, start_s) in enumerate(ordered):
        begin = 0 if index == 0 else offset
        end = ordered[index + 1][0] if index + 1 < len(ordered) else len(text)
        word = " ".join(text[begin:end].split())
        if word:
            words.append((word, start_s))
    return tuple(words)


@dataclass(frozen=True)
class PrerenderedSpeech:
    """A sentence already synthesized: PCM16 mono audio at `sample_rate`, and its words'
    start times (seconds from the audio's start; empty: rendered without times)."""

    text: str
    sample_rate: int
    audio: bytes
    words: tuple[TimedWord, ...] = ()

    @property
    def duration_s(self) -> float:
        return len(self.audio) / 2 / self.sample_rate

    @classmethod
    def from_timed(cls, text: str, speech: TimedSpeech) -> PrerenderedSpeech:
        """An eSpeak rendering of `text`, its word events kept."""
        return cls(text=text, sample_rate=speech.sample_rate, audio=speech.audio,
                   words=timed_words(text, ((w.char_offset, w.start_s) for w in speech.words)))


class GreetingPlayerProcessor(FrameProcessor):
    """Plays the pre-rendered greeting right after the pipeline starts."""

    def __init__(self, session: CallSession, greeting: PrerenderedSpeech | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._greeting = greeting
        self._unplayed_words: tuple[TimedWord, ...] = ()  # sent when its audio starts

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._greeting is not None:
            await self._play(self._greeting)
        elif isinstance(frame, BotStartedSpeakingFrame) and self._unplayed_words:
            await self._send_words(self._unplayed_words)
        elif isinstance(frame, InterruptionFrame):
            self._unplayed_words = ()  # never played: no words, and none for the next reply

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
            if speech.words and speech.audio:
                self._unplayed_words = speech.words
                await self.push_frame(TTSStoppedFrame(context_id=context_id))
                return
        text = TTSTextFrame(speech.text, text_type=TextType.SENTENCE, context_id=context_id)
        # Without audio the bot never "speaks", so RTVI would hold the words forever.
        text.skip_tts = not self._session.is_audio
        await self.push_frame(text)
        await self.push_frame(TTSStoppedFrame(context_id=context_id))

    async def _send_words(self, words: tuple[TimedWord, ...]) -> None:
        """The greeting's words, each stamped with when its audio plays; the transport
        releases each on its `pts`, so a barge-in drops the words never heard."""
        self._unplayed_words = ()
        context_id = f"greeting-{self._session.call_id}"
        audio_start_ns = self.get_clock().get_time()  # the first chunk is playing
        for word, start_s in words:
            frame = TTSTextFrame(word, text_type=TextType.WORD, context_id=context_id)
            frame.pts = audio_start_ns + round(start_s * 1_000_000_000)
            await self.push_frame(frame)
