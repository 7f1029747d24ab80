"""A line the agent says on its own, framed as an LLM reply would be.

The TTS speaks it (or, in a text session, `skip_tts` keeps it words only), the call
recorder records it as an agent turn, and the assistant aggregator adds it to the
context: every processor downstream treats it like any other reply. `LineSpeakerProcessor` is the
base of every processor that says such lines: it follows the session's output mode
(`LLMConfigureOutputFrame`) in one place.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMConfigureOutputFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

# Metadata key on a reply's start frame: the agent says this on its own (a check-in, the
# safety holding line), not in answer to a caller turn, so newer caller words never
# make it stale (the reply guard lets it through).
OWN_LINE = "agent_own_line"


def reply_frames(text: str, *, skip_tts: bool = False, own_line: bool = False) -> list[Frame]:
    """The frames of a whole reply saying `text`."""
    start = LLMFullResponseStartFrame()
    if own_line:
        start.metadata[OWN_LINE] = True
    words = LLMTextFrame(text)
    words.skip_tts = skip_tts
    return [start, words, LLMFullResponseEndFrame()]


class LineSpeakerProcessor(FrameProcessor):
    """A processor that says lines of its own: words only when the output is text."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._skip_tts = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMConfigureOutputFrame):
            self._skip_tts = frame.skip_tts  # text sessions: words only, as an LLM would do

    async def say_line(self, text: str, *, own_line: bool = False) -> None:
        """Say `text` as a whole reply (`own_line`: not an answer to a caller turn)."""
        for frame in reply_frames(text, skip_tts=self._skip_tts, own_line=own_line):
            await self.push_frame(frame)
