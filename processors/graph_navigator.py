"""The context-graph navigator in the pipeline: caller turn in, the engine's reply out.

Between the user aggregator and the LLM. Each caller turn (the aggregator's context
frame) goes to the call's `BookingEngine`; its reply is pushed downstream as an LLM
response would be, so the TTS, the recorder and the call controller treat it like any
other, and the context frame goes no further. The terminal state ends the call once
its goodbye has been said. If the engine fails (the graph cannot be walked) the turn,
and every turn after it, passes on to what follows (the LLM, or the fallback responder
when there is none): static prompt mode, recorded, never silence.

The engine's prefetch starts with the pipeline and is awaited (bounded) only by the
first caller turn, so the greeting never waits for the database.
"""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    LLMConfigureOutputFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from flows.engine import BookingEngine
from processors.fallback_responder import last_user_text
from processors.frames import EndCallFrame, NavigationFrame
from services.call_session import CallSession, CompletionReason

PREFETCH_WAIT_S = 2.5


class GraphNavigator(FrameProcessor):
    def __init__(self, session: CallSession, engine: BookingEngine, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._engine = engine
        self._started: asyncio.Task | None = None
        self._skip_tts = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self._started = self.create_task(self._engine.start(), name="graph-prefetch")
        elif isinstance(frame, LLMConfigureOutputFrame):
            self._skip_tts = frame.skip_tts
        elif (
            isinstance(frame, LLMContextFrame)
            and direction is FrameDirection.DOWNSTREAM
            and not self._engine.failed
        ):
            if await self._answer(last_user_text(frame)):
                return
        await self.push_frame(frame, direction)

    async def _answer(self, caller_text: str) -> bool:
        """Answer the turn from the graph (False: the engine failed, let the frame through)."""
        await self._wait_for_prefetch()
        try:
            reply = await self._engine.turn(caller_text)
        except Exception as error:  # noqa: BLE001 - never silence: static prompt mode instead
            logger.exception(f"call {self._session.call_id}: context graph engine crashed")
            self._engine.failed = True
            self._session.log.event("context_graph_failed", error=type(error).__name__)
            return False
        if self._engine.failed or not reply.text:
            if not self._engine.failed:
                self._engine.failed = True
                self._session.log.event("context_graph_failed", reason="empty reply")
            logger.warning(f"call {self._session.call_id}: static prompt mode from here on")
            return False
        last = reply.decisions[-1]
        await self.push_frame(NavigationFrame(nav_ms=reply.nav_ms, state=last.state,
                                              action=last.action))
        await self.push_frame(LLMFullResponseStartFrame())
        text = LLMTextFrame(reply.text)
        text.skip_tts = self._skip_tts
        await self.push_frame(text)
        await self.push_frame(LLMFullResponseEndFrame())
        self._session.log.update_call(final_state=last.state)
        if reply.transfer_to and self._session.transfer_to is None:
            self._session.transfer_to = reply.transfer_to  # dialled after the goodbye plays
            self._session.log.event("transfer_requested", state=last.state)
        if reply.end_call:
            reason = (CompletionReason.TRANSFERRED if self._session.transfer_to
                      else CompletionReason.AGENT_HANGUP)
            await self.push_frame(EndCallFrame(reason=reason.value))
        return True

    async def _wait_for_prefetch(self) -> None:
        if self._started is None or self._started.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._started), PREFETCH_WAIT_S)
        except TimeoutError:
            self._session.log.event("prefetch_slow", waited_ms=int(PREFETCH_WAIT_S * 1000))
