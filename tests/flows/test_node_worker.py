"""Pipecat Flows enters a node through the navigator: the frames it queues for the node
go where the turn is, never to the pipeline's source; ending the pipeline, and the
worker's events that Flows' actions wait on, stay the real worker's."""

from pipecat.flows import FlowManager, NodeConfig
from pipecat.flows.actions import FunctionActionFrame
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMMessagesAppendFrame,
    LLMRunFrame,
    LLMSetToolsFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection

from flows.node_worker import NodeWorker
from tests.fakes import ScriptedLLM


class PipelineSource:
    """Stands in for the call's `PipelineWorker`: what was queued at the pipeline's source,
    and the event handlers and reached-downstream filter it was given."""

    def __init__(self) -> None:
        self.queued: list[Frame] = []
        self.handlers: dict[str, object] = {}
        self.reached_downstream: tuple[type[Frame], ...] = ()

    async def queue_frame(self, frame: Frame,
                          direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        self.queued.append(frame)

    def set_reached_downstream_filter(self, types: tuple[type[Frame], ...]) -> None:
        self.reached_downstream = types

    def event_handler(self, name: str):
        def register(handler):
            self.handlers[name] = handler
            return handler
        return register


async def test_a_nodes_frames_go_to_the_navigator_and_the_end_of_the_pipeline_to_its_source():
    source, at_navigator = PipelineSource(), []

    async def deliver(frame: Frame) -> None:
        at_navigator.append(frame)

    flows = FlowManager(llm=ScriptedLLM(), context_aggregator=LLMContextAggregatorPair(
        LLMContext()), worker=NodeWorker(source, deliver))
    await flows.initialize()
    await flows.set_node_from_config(NodeConfig(
        name="closing", task_messages=[{"role": "developer", "content": "Do now: say_goodbye"}],
        post_actions=[{"type": "end_conversation"}],
    ))

    assert [type(f) for f in at_navigator] == [LLMMessagesAppendFrame, LLMSetToolsFrame,
                                               LLMRunFrame]
    assert at_navigator[0].messages == [{"role": "developer", "content": "Do now: say_goodbye"}]
    assert [type(f) for f in source.queued] == [EndFrame]
    assert FunctionActionFrame in source.reached_downstream  # Flows' actions still wait on it
    assert "on_frame_reached_downstream" in source.handlers
