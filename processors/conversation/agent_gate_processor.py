"""What may reach the AI agent: no turn while a human takes over, no stale turn.

Between the user aggregator and the navigator.

- When the safety monitor has suspended the agent (`conversation.suspended`), each
  caller turn (the aggregator's context frame) and any request to run the LLM stops
  here; the caller hears a short fixed line that someone is joining
  (`prompts/safety/still_holding.txt`), never generated text (`agent_held` events).
- Once the call is ending for the server's shutdown (`server_shutdown`, which nothing
  calls off), no caller turn is answered: the caller's words said over the last line
  would otherwise get a reply after it (`turn_unanswered` events).
- Stage 1 of the supersede guard (processors/conversation/reply_guard_processor.py): a caller turn that
  reaches the agent after newer caller words were finalized is not answered — the newer
  turn will be (`superseded_reply`, stage `pre_generation`). The turn let through sets
  `conversation.answering`, against which the later stages judge the reply.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMContextUserTurnFrame,
    LLMRunFrame,
)
from pipecat.processors.frame_processor import FrameDirection

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from lib.prompts import render_prompt
from processors.llm_context import is_caller_turn, last_user_text
from processors.voice.line_speaker_processor import LineSpeakerProcessor


class AgentGateProcessor(LineSpeakerProcessor):
    def __init__(self, session: CallSession, *, transfer_number: str | None = None,
                 **kwargs) -> None:
        """`transfer_number`: where a held call is put through (a barge-in over the
        holding line calls the first transfer off; the next held turn asks again)."""
        super().__init__(**kwargs)
        self._session = session
        self._transfer_number = transfer_number
        self._turn_end = 0  # finalized transcripts when the current turn ended

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        conversation = self._session.conversation
        downstream = direction is FrameDirection.DOWNSTREAM
        if isinstance(frame, LLMContextUserTurnFrame) and downstream:
            self._turn_end = conversation.final_transcripts
        elif (self._session.completion_reason is CompletionReason.SERVER_SHUTDOWN and downstream
              and isinstance(frame, (LLMContextFrame, LLMRunFrame))):
            self._session.log.event("turn_unanswered", why="server_shutdown")
            return
        elif (conversation.suspended and downstream
              and isinstance(frame, (LLMContextFrame, LLMRunFrame))):
            if isinstance(frame, LLMContextFrame):
                await self._hold(last_user_text(frame))
            return
        elif (isinstance(frame, LLMContextFrame) and downstream
              and is_caller_turn(frame.context)):
            if conversation.final_transcripts > self._turn_end:
                self._session.log.event(
                    "superseded_reply", stage="pre_generation",
                    newer_turns=conversation.final_transcripts - self._turn_end)
                return
            conversation.answering = conversation.final_transcripts
        await self.push_frame(frame, direction)

    async def _hold(self, caller_text: str) -> None:
        conversation = self._session.conversation
        escalated_on = conversation.escalated_on
        if escalated_on and escalated_on in caller_text:
            conversation.escalation_answered()  # the holding line already answered this turn
            self._session.log.event("agent_held", answered="holding line")
            return
        self._session.log.event("agent_held", answered="still holding")
        await self.say_line(render_prompt("safety/still_holding.txt"), own_line=True)
        if self._transfer_number and self._session.request_transfer(
                self._transfer_number, why="held"):
            await self.push_frame(EndCallFrame(reason=CompletionReason.TRANSFERRED.value))
