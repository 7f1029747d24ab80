"""A chain of processors that caller audio passes by.

Caller audio is 50 frames a second, and each processor a frame crosses costs a queue
hand-off and a task switch. The observers between the STT and the user aggregator (the
quick observer, the safety monitor, the director, the silence monitor, the world
extractor) read transcripts, speaking frames and the call's system frames, never the
sound, so they run as one chain that audio frames skip: an audio frame goes on from
where the chain stands at once, without entering it; every other frame goes through the
chain in order, in both directions. So guidance a layer pushes still lands ahead of the
transcript it came from, and starts, interruptions and ends still reach every layer.

Only caller audio may skip: it is a system frame, which Pipecat already lets overtake
transcripts and other data frames in every queue, so skipping changes no order anyone
relies on. Agent audio is a data frame whose place among the TTS's text and stop frames
matters; it ends after the transport output instead
(processors/voice/agent_audio_end_processor.py).

Pipecat's `ParallelPipeline` with filters would route audio the same way, but it adds a
queued hop and a filter hop to every frame and keeps the id of every frame it has seen
for the rest of the call; this chain is a `Pipeline` (direct, no queue of its own) that
hands audio on without entering it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipecat.frames.frames import Frame, InputAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


class AudioBypass(Pipeline):
    """`processors` in order; caller audio goes past them."""

    def __init__(self, processors: Sequence[FrameProcessor]) -> None:
        super().__init__(processors)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, InputAudioRawFrame):
            await self.push_frame(frame, direction)
            return
        await super().process_frame(frame, direction)
