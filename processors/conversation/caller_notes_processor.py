"""The LLM context's one editor in a call without a context graph.

In the graph navigator's place, just before the fallback responder and the LLM: the
notes earlier layers attached to the caller's turn (the emotion steering's voice note)
are written after the caller's words (processors/llm_context.py). With a context graph
the navigator writes them itself, so a call has one editor of its context either way.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from processors.llm_context import write_caller_notes


class CallerNotesProcessor(FrameProcessor):
    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and direction is FrameDirection.DOWNSTREAM:
            write_caller_notes(frame)
        await self.push_frame(frame, direction)
