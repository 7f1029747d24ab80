"""The user turn start strategy that makes barge-in semantic (Pipecat turn strategy).

It replaces the VAD and transcription start strategies in the user aggregator. While
the agent is silent it starts the caller's turn as they did (voice activity or words);
while the agent speaks it follows `services/observers/barge_in.BargeInRule`: words and
0.5 s of speech, or 1.0 s of continuous speech, and only then the turn starts — with
the interruption that stops the agent. Words too short to take the floor are dropped
from the aggregation. Each barge-in counts in `conversation.barge_ins` and is a
`barge_in` event.
"""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy

from services.call_session import CallSession
from services.observers.barge_in import BargeIn, BargeInRule

POLL_S = 0.05


class SemanticBargeInStrategy(BaseUserTurnStartStrategy):
    def __init__(self, session: CallSession, *, rule: BargeInRule | None = None,
                 poll_s: float = POLL_S, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._rule = rule or BargeInRule()
        self._poll_s = poll_s
        self._bot_speaking = False
        self._watch: asyncio.Task | None = None

    async def setup(self, setup: FrameProcessorSetup):
        await super().setup(setup)
        self._watch = self.task_manager.create_task(self._watch_speech(), f"{self}::watch")

    async def cleanup(self):
        await super().cleanup()
        if self._watch is not None:
            await self.task_manager.cancel_task(self._watch)
            self._watch = None

    async def handle_user_turn_started(self):
        self._rule.reset()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        now = self._session.conversation.clock()
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
            self._rule.reset()
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            if not self._bot_speaking:
                await self.trigger_user_turn_started()
                return ProcessFrameResult.STOP
            self._rule.speech_started(now)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._rule.speech_stopped(now)
        elif isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            if not frame.text.strip():
                return ProcessFrameResult.CONTINUE
            if not self._bot_speaking:
                await self.trigger_user_turn_started()
                return ProcessFrameResult.STOP
            decision = self._rule.heard_words(now)
            if decision is not None:
                await self._barge_in(decision, now)
                return ProcessFrameResult.STOP
            if isinstance(frame, TranscriptionFrame) and self._rule.stopped is not None:
                await self.trigger_reset_aggregation()  # "mm-hm" under the agent's voice
        return ProcessFrameResult.CONTINUE

    async def _watch_speech(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            if not self._bot_speaking:
                continue
            now = self._session.conversation.clock()
            decision = self._rule.tick(now)
            if decision is not None:
                await self._barge_in(decision, now)

    async def _barge_in(self, how: BargeIn, now: float) -> None:
        speech_s = round(self._rule.speech_s(now), 2)
        self._rule.reset()
        self._bot_speaking = False  # the interruption stops the agent
        conversation = self._session.conversation
        conversation.barge_ins += 1
        self._session.log.event("barge_in", how=how, speech_s=speech_s,
                                count=conversation.barge_ins)
        await self.trigger_user_turn_started()
