"""Turns typed caller lines (eval/RTVI `send-text`) into transcriptions.

In text sessions the caller's line arrives as an RTVI message, which Pipecat turns
into a direct context append. Converting it to a `TranscriptionFrame` instead means
every layer after it (observers, navigator, recorder) sees exactly what it would
see from speech-to-text, so text scenarios exercise the same path as phone calls.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, LLMMessagesAppendFrame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.processors.frameworks.rtvi.frames import RTVISendTextFrame
from pipecat.utils.time import time_now_iso8601


def is_typed_user_line(frame: Frame) -> bool:
    """RTVI's own context append for a `send-text` message: one user message."""
    if not isinstance(frame, LLMMessagesAppendFrame) or len(frame.messages) != 1:
        return False
    message = frame.messages[0]
    return isinstance(message, dict) and message.get("role") == "user"


class TextInputProcessor(FrameProcessor):
    """Placed first in text sessions, before any intelligence layer."""

    def __init__(self, user_id: str = "caller", **kwargs) -> None:
        super().__init__(**kwargs)
        self._user_id = user_id

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM and is_typed_user_line(frame):
            return  # replaced by the transcription below
        if isinstance(frame, RTVISendTextFrame):
            text = frame.text.strip()
            if text:
                await self.push_frame(
                    TranscriptionFrame(text, self._user_id, time_now_iso8601(), finalized=True)
                )
            return
        await self.push_frame(frame, direction)
