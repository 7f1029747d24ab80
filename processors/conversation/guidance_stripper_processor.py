"""Keeps guidance out of the agent's voice.

Between the LLM and the TTS. The LLM's streamed text goes through one
`GuidanceFilter` per reply (processors/conversation/guidance_filter.py), so a tag split
over several text frames is still recognised; what is certainly speech goes on at
once as a `SpokenTextFrame` in place of the original, and what might be the start of
a tag waits for the next chunk (at most a few characters). Text spoken outside a
reply (`TTSSpeakFrame`) is cleaned whole. A removal is a `guidance_stripped` event.
The call recorder applies the same rules to the reply's raw text, so the transcript
stored for the agent is what was spoken.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession
from call.frames import SpokenTextFrame
from processors.conversation.guidance_filter import GuidanceFilter, strip_guidance


class GuidanceStripperProcessor(FrameProcessor):
    def __init__(self, session: CallSession, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._filter = GuidanceFilter()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is not FrameDirection.DOWNSTREAM:
            await self.push_frame(frame, direction)
            return
        if isinstance(frame, LLMFullResponseStartFrame):
            self._filter.reset()
        elif isinstance(frame, LLMTextFrame) and not isinstance(frame, SpokenTextFrame):
            await self._speak(self._filter.feed(frame.text), frame)
            return
        elif isinstance(frame, LLMFullResponseEndFrame):
            await self._speak(self._filter.flush(), None)
            self._report(self._filter.removed_count, "reply")
            self._filter.reset()
        elif isinstance(frame, InterruptionFrame):
            self._filter.reset()
        elif isinstance(frame, TTSSpeakFrame):
            cleaned = strip_guidance(frame.text)
            if cleaned != frame.text.strip():
                self._report(1, "spoken line")
                if not cleaned:
                    return
                frame.text = cleaned
        await self.push_frame(frame, direction)

    async def _speak(self, text: str, original: LLMTextFrame | None) -> None:
        if not text:
            return
        spoken = SpokenTextFrame(text)
        if original is not None:
            spoken.skip_tts = original.skip_tts
            spoken.append_to_context = original.append_to_context
        await self.push_frame(spoken)

    def _report(self, removed: int, where: str) -> None:
        if removed:
            self._session.log.event("guidance_stripped", removed=removed, where=where)
