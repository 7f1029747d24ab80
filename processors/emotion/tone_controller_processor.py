"""The agent's voice tone, per turn.

Between the LLM and the TTS. At the first words of each agent reply it runs the tone
chain (processors/emotion/tone.py: burst → prosody → sensitive topic → momentum →
workspace → neutral) over the caller's current state and what the agent is about to
say (the navigator's intent plus those first words), and — when the tone differs from
the one the voice has — sends the TTS a settings update with that tone's rendering
(processors/emotion/voice_controls.py) just ahead of the words. Speed and volume are the
workspace's and never touched. A `ToneFrame` carries the choice to the call record; a
change of tone is a `tone` event. It also measures how long the LLM took to its first
words, which the filler rules use to expect the next wait.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.settings import TTSSettings

from call.call_session import CallSession
from call.frames import NavigationFrame, ToneFrame
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.tone import choose_tone
from processors.emotion.voice_controls import tts_settings_for


class ToneControllerProcessor(FrameProcessor):
    def __init__(
        self, session: CallSession, emotion: CallEmotion, *,
        tts_settings: tuple[type[TTSSettings], str] | None, **kwargs,
    ) -> None:
        """`tts_settings`: the TTS's settings class and provider kind (`tone_settings_of`);
        None: the tone is chosen and recorded, but this TTS cannot render it."""
        super().__init__(**kwargs)
        self._session = session
        self._emotion = emotion
        self._tts_settings = tts_settings
        self._intent = ""
        self._in_reply = False
        self._chosen = False
        self._voice_tone: str | None = None  # what the TTS is set to

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, NavigationFrame):
                self._intent = frame.intent
            elif isinstance(frame, LLMFullResponseStartFrame):
                self._in_reply, self._chosen = True, False
            elif isinstance(frame, LLMTextFrame) and self._in_reply and not self._chosen:
                await self._choose(frame.text)
            elif isinstance(frame, LLMFullResponseEndFrame):
                self._in_reply = False
                self._intent = ""
            elif isinstance(frame, TTSSpeakFrame) and not self._in_reply:
                await self._choose(frame.text)  # spoken outside a reply (a filler)
        await self.push_frame(frame, direction)

    async def _choose(self, first_words: str) -> None:
        self._chosen = True
        emotion = self._emotion
        started = emotion.reply_requested_at
        if started is not None:
            emotion.latency.observe("engage_llm", (emotion.clock() - started) * 1000)
            emotion.reply_requested_at = None
        snapshot = emotion.snapshot()
        choice = choose_tone(
            snapshot, now=emotion.clock(), upcoming_text=f"{self._intent} {first_words}",
            sensitive_topics=self._session.voice.sensitive_topics, previous=emotion.tone,
            workspace_tone=self._session.voice.tone,
        )
        if choice.tone != emotion.tone:
            self._session.log.event("tone", tone=choice.tone, level=int(choice.level),
                                    why=choice.why)
        emotion.tone = choice.tone
        await self.push_frame(ToneFrame(tone=choice.tone, level=int(choice.level), why=choice.why))
        if choice.tone != self._voice_tone and self._tts_settings is not None:
            self._voice_tone = choice.tone
            settings_class, provider = self._tts_settings
            await self.push_frame(TTSUpdateSettingsFrame(
                delta=tts_settings_for(choice.tone, settings_class, provider)))


def tone_settings_of(tts: object) -> tuple[type[TTSSettings], str] | None:
    """How a TTS takes a tone: ElevenLabs voice settings, eSpeak pitch (else None)."""
    from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

    from services.espeak.tts import EspeakTTSService

    if isinstance(tts, ElevenLabsTTSService):
        return ElevenLabsTTSService.Settings, "elevenlabs"
    if isinstance(tts, EspeakTTSService):
        return EspeakTTSService.Settings, "local"
    return None
