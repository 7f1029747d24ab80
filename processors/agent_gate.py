"""While a human is taking over, no caller turn reaches the AI agent.

Between the user aggregator and the navigator. When the safety monitor has suspended
the agent (`conversation.suspended`), each caller turn (the aggregator's context frame)
and any request to run the LLM stops here; the caller hears a short fixed line that
someone is joining (`prompts/safety/still_holding.txt`), never generated text. Every
held turn is an `agent_held` event.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMConfigureOutputFrame,
    LLMContextFrame,
    LLMRunFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from processors.fallback_responder import last_user_text
from processors.spoken_line import reply_frames
from services.call_session import CallSession
from services.prompts import render_prompt


class AgentGate(FrameProcessor):
    def __init__(self, session: CallSession, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._skip_tts = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMConfigureOutputFrame):
            self._skip_tts = frame.skip_tts
        elif (self._session.conversation.suspended and direction is FrameDirection.DOWNSTREAM
              and isinstance(frame, (LLMContextFrame, LLMRunFrame))):
            if isinstance(frame, LLMContextFrame):
                await self._hold(last_user_text(frame))
            return
        await self.push_frame(frame, direction)

    async def _hold(self, caller_text: str) -> None:
        conversation = self._session.conversation
        escalated_on = conversation.escalated_on
        if escalated_on and escalated_on in caller_text:
            conversation.escalated_on = None  # the holding line already answered this turn
            self._session.log.event("agent_held", answered="holding line")
            return
        self._session.log.event("agent_held", answered="still holding")
        for line in reply_frames(render_prompt("safety/still_holding.txt"),
                                 skip_tts=self._skip_tts):
            await self.push_frame(line)
