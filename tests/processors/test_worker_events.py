"""What the pipeline worker notices by itself ends up in the call record with a reason."""

import asyncio

import pytest
from pipecat.frames.frames import Frame, StartFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.filters.identity_filter import IdentityFilter
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from call.call_session import CompletionReason
from pipeline.factory import record_worker_events

pytestmark = pytest.mark.timeout(20)


class BrokenService(FrameProcessor):
    """Fails for good as soon as the call starts (e.g. a provider that rejects its key)."""

    def __init__(self, fatal: bool) -> None:
        super().__init__()
        self._fatal = fatal

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame):
            await self.push_error(error_msg="provider rejected the key", fatal=self._fatal)


async def run_worker(worker: PipelineWorker, seconds: float) -> None:
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    await runner.add_workers(worker)
    task = asyncio.create_task(runner.run())
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        await worker.cancel()
        await asyncio.wait_for(task, 10)


async def test_a_silent_call_ends_as_an_idle_timeout(session, writer):
    worker = PipelineWorker(Pipeline([IdentityFilter()]), idle_timeout_secs=0.3, enable_rtvi=False)
    record_worker_events(worker, session)
    await run_worker(worker, 5)
    assert session.completion_reason is CompletionReason.IDLE_TIMEOUT
    assert writer.events("idle_timeout")


async def test_a_fatal_service_error_ends_the_call_as_a_pipeline_error(session):
    worker = PipelineWorker(Pipeline([BrokenService(fatal=True)]), enable_rtvi=False)
    record_worker_events(worker, session)
    await run_worker(worker, 1.0)
    assert session.completion_reason is CompletionReason.PIPELINE_ERROR


async def test_a_passing_service_error_leaves_the_call_going(session):
    worker = PipelineWorker(Pipeline([BrokenService(fatal=False)]), enable_rtvi=False)
    record_worker_events(worker, session)
    await run_worker(worker, 0.5)
    assert session.completion_reason is None
