"""The one place that ends a call.

Other processors ask for the end with an `EndCallFrame` behind their goodbye; the
controller, sitting after the output transport, waits a short grace period so the
telephone network finishes playing the audio, then ends the pipeline (which hangs
up the phone call through Twilio when credentials exist). It also enforces the
maximum call duration on the clock, so a silent caller is ended too.
"""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    EndWorkerFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from lib.prompts import render_prompt


class CallControllerProcessor(FrameProcessor):
    """Ends the call after the goodbye has played, or when the call runs too long."""

    def __init__(
        self, session: CallSession, *, max_duration_s: float, grace_s: float = 0.6, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._max_duration_s = max_duration_s
        self._grace_s = grace_s
        self._timer: asyncio.Task | None = None
        self._ending = False
        self._ended = False  # the worker was told to end: nothing can call it back

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, EndCallFrame):
            await self._end(CompletionReason(frame.reason))
            return
        if isinstance(frame, InterruptionFrame) and not self._ended:
            # The caller spoke over the goodbye: a transfer waiting for it is off.
            self._session.cancel_transfer("barge_in")
        if isinstance(frame, StartFrame):
            self._timer = self.create_task(self._duration_limit(), name="max_call_duration")
        elif isinstance(frame, EndFrame) and self._timer is not None:
            await self.cancel_task(self._timer)
            self._timer = None
        await self.push_frame(frame, direction)

    async def cleanup(self) -> None:
        await super().cleanup()
        if self._timer is not None:
            await self.cancel_task(self._timer)
            self._timer = None

    async def _end(self, reason: CompletionReason) -> None:
        if self._ending:
            return
        self._ending = True
        set_reason = self._session.end_as(reason)
        self._session.log.event("call_end_requested", reason=reason.value)
        if self._session.is_audio:
            try:
                await asyncio.sleep(self._grace_s)  # let the network play the last audio
            except asyncio.CancelledError:
                # A barge-in cut the goodbye short: the call goes on (and may end later).
                self._ending = False
                if set_reason:
                    self._session.end_called_off(reason)
                self._session.cancel_transfer("barge_in")
                self._session.log.event("call_end_cancelled", reason=reason.value)
                raise
        self._ended = True
        logger.info(f"call {self._session.call_id}: ending ({reason.value})")
        await self.push_frame(EndWorkerFrame(reason=reason.value), FrameDirection.UPSTREAM)

    async def _duration_limit(self) -> None:
        await asyncio.sleep(self._max_duration_s)
        logger.info(f"call {self._session.call_id}: maximum duration reached")
        self._session.log.event("max_duration_reached", limit_s=self._max_duration_s)
        goodbye = render_prompt("max_duration.txt")
        # Enter at the pipeline source so the goodbye is synthesized, then end after it.
        await self.pipeline_worker.queue_frames(
            [TTSSpeakFrame(goodbye), EndCallFrame(reason=CompletionReason.MAX_DURATION.value)]
        )
