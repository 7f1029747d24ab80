"""Never answer stale input: a guard in three stages against superseded caller turns.

The caller sometimes finishes a sentence and corrects themselves ("Tuesday… no,
Wednesday"). Three checks keep the agent from answering what was already replaced:

1. Pre-generation (in `AgentGateProcessor`, before the navigator and the LLM): a caller turn
   whose context reaches the agent after newer caller words were finalized is not
   answered — the newer turn is.
2. Abortable generation: the newer turn's start interrupts the reply being generated
   (Pipecat cancels the LLM); this processor records it when nothing had played yet.
3. Pre-playback (here, after the LLM, before the TTS): a reply whose first words arrive
   after newer caller words were finalized is dropped before it is heard.

The newest turn is never dropped: a reply is only stale against words that came after
its own turn. Lines the agent says on its own (check-ins, the safety holding line) are
never stale. Each stage that acts records a `superseded_reply` event.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession
from processors.voice.line_speaker_processor import OWN_LINE


class ReplyGuardProcessor(FrameProcessor):
    def __init__(self, session: CallSession, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._in_reply = False
        self._own_line = False
        self._heard = False  # some of this reply already went on to be spoken
        self._dropping = False
        self._reply_for = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        conversation = self._session.conversation
        if isinstance(frame, BotStartedSpeakingFrame):
            self._heard = self._heard or self._in_reply
        elif (isinstance(frame, LLMFullResponseStartFrame)
              and direction is FrameDirection.DOWNSTREAM):
            self._in_reply, self._heard, self._dropping = True, False, False
            self._own_line = bool(frame.metadata.get(OWN_LINE))
            conversation.agent_replies += 1
            self._reply_for = conversation.answering
        elif isinstance(frame, InterruptionFrame):
            if self._in_reply and not self._heard and not self._own_line:
                self._session.log.event("superseded_reply", stage="generation")
            self._in_reply = self._dropping = False
        elif isinstance(frame, LLMTextFrame) and direction is FrameDirection.DOWNSTREAM:
            if self._dropping:
                return
            if (self._in_reply and not self._heard and not self._own_line
                    and conversation.final_transcripts > self._reply_for):
                self._dropping = True
                self._session.log.event(
                    "superseded_reply", stage="pre_playback",
                    newer_turns=conversation.final_transcripts - self._reply_for)
                return
            self._heard = True
        elif isinstance(frame, LLMFullResponseEndFrame):
            self._in_reply = self._dropping = False
        await self.push_frame(frame, direction)
