"""The worker `pipecat.flows` is handed: a node's frames start where the turn is.

`FlowManager` queues each node's task messages, its tools and the LLM run on its worker,
which would put them at the pipeline's source: through the transport input, the STT and
every observer into the user aggregator, and a second context frame for the turn past
the gate, the steering and the navigator. `NodeWorker` gives them to the graph navigator
instead (`deliver`), which writes them into the context and runs the LLM from its own
place; so do a tool's transitions, which Flows enters the same way. The frames that end
the pipeline, which must pass every processor from the source, and everything else a
worker does (its events, the reached-downstream filter Flows' actions wait on) stay the
real worker's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pipecat.frames.frames import CancelFrame, EndFrame, Frame, StopFrame
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection

# Frames that end the pipeline: from its source, through every processor.
PIPELINE_ENDS = (EndFrame, CancelFrame, StopFrame)


class NodeWorker:
    def __init__(self, worker: PipelineWorker,
                 deliver: Callable[[Frame], Awaitable[None]]) -> None:
        self._worker = worker
        self._deliver = deliver

    async def queue_frame(self, frame: Frame,
                          direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        if direction is FrameDirection.DOWNSTREAM and not isinstance(frame, PIPELINE_ENDS):
            await self._deliver(frame)
        else:
            await self._worker.queue_frame(frame, direction)

    async def queue_frames(self, frames: Iterable[Frame],
                           direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        for frame in frames:
            await self.queue_frame(frame, direction)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)
