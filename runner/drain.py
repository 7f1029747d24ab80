"""Stopping the process without cutting anyone off mid-word (the graceful drain).

`CallDrain.begin` turns the process away from new calls (`AppRuntime.has_capacity` is
False, so the answer webhook says the lines are busy; `/health` answers 503 "draining",
so a load balancer sends the next call to another pod). Every live call, and any that
starts meanwhile, ends the way the duration limit ends one: its reason is
`server_shutdown` from that moment (so the caller's new words open no new turn), the
turn under way plays out, then a short line (`prompts/telephony/shutdown.txt`) and
`EndCallFrame`, both uninterruptible: a caller talking over the line neither cuts it short
nor keeps the call open. `finish` waits for the calls within the bound and cancels whatever is
left, which `run_call` records as `server_shutdown` too; `hurry` (a second signal)
cancels them at once.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger
from pipecat.frames.frames import TTSSpeakFrame

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from lib.prompts import render_prompt

if TYPE_CHECKING:
    from pipecat.pipeline.worker import PipelineWorker

SHUTDOWN_LINE = "telephony/shutdown.txt"
CANCEL_WAIT_S = 15.0  # cancelled calls still flush their records (bounded there too)


@dataclass(frozen=True)
class DrainOutcome:
    ended: int  # calls that said their line and ended within the bound
    cut: int  # calls cancelled at the bound (or at a second signal)
    seconds: float


class CallDrain:
    """The process's drain: begun once, finished once."""

    def __init__(self) -> None:
        self._begun = asyncio.Event()
        self._hurry = asyncio.Event()
        self.begun_at: float | None = None

    @property
    def draining(self) -> bool:
        return self._begun.is_set()

    def begin(self) -> bool:
        """Stop taking calls and ask the live ones to end; False if already begun."""
        if self._begun.is_set():
            return False
        self.begun_at = time.monotonic()
        self._begun.set()
        logger.warning("draining: new calls are turned away; live calls are told it must end")
        return True

    def hurry(self) -> None:
        """End every call now (a second signal): no more waiting for lines to play."""
        self.begin()
        self._hurry.set()

    async def wait_begun(self) -> None:
        await self._begun.wait()

    async def finish(self, calls: dict[str, asyncio.Task], bound_s: float) -> DrainOutcome:
        """Wait up to `bound_s` for `calls` (the live calls' tasks, which leave the dict as
        they end; new ones may join) to end; cancel whatever is left."""
        self.begin()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound_s
        started = time.monotonic()
        watched: set[asyncio.Task] = set()  # a call leaves `calls` before its record is flushed
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            while not self._hurry.is_set():
                watched |= set(calls.values())
                pending = {task for task in watched if not task.done()}
                left = deadline - loop.time()
                if not pending or left <= 0:
                    break
                await asyncio.wait({*pending, hurry}, timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurry.cancel()
        watched |= set(calls.values())
        cut = [task for task in watched if not task.done()]
        for task in cut:
            task.cancel()
        if cut:
            await asyncio.wait(cut, timeout=CANCEL_WAIT_S)
        ended = len(watched) - len(cut)
        outcome = DrainOutcome(ended=ended, cut=len(cut),
                               seconds=round(time.monotonic() - started, 3))
        logger.info(f"drained: {outcome.ended} call(s) ended with their line, {outcome.cut} "
                    f"cut off, in {outcome.seconds:.2f} s")
        return outcome


async def end_call_on_drain(drain: CallDrain, session: CallSession,
                            worker: PipelineWorker) -> None:
    """Started with each call: once the drain begins, the call's last line and its end
    (nothing, if the call is already ending for a reason of its own)."""
    await drain.wait_begun()
    if not session.end_as(CompletionReason.SERVER_SHUTDOWN):
        return
    session.log.event("server_draining")
    logger.info(f"call {session.call_id}: ending for the server's shutdown")
    line = TTSSpeakFrame(render_prompt(SHUTDOWN_LINE))
    end = EndCallFrame(reason=CompletionReason.SERVER_SHUTDOWN.value)
    # The caller talking over the line neither cuts it nor keeps the call open.
    line.interruptible = end.interruptible = False
    # At the pipeline's source, as the duration limit's goodbye: after the turn under way.
    await worker.queue_frames([line, end])
