"""The quick observer in the call: 0 ms pattern signals and the programmatic goodbye.

Between the STT and the user aggregator. Each final transcript's
signals (processors/conversation/quick_rules.py) become one guidance message appended to the LLM
context without an LLM run of its own (`LLMMessagesAppendFrame(run_llm=False)`), pushed
just ahead of the transcript itself (~0.1 ms): the aggregator writes it before the
caller's message, and the caller's turn, when it ends, runs the LLM with it there.

A strong goodbye ends the call `goodbye_delay_s` (3.5 s) later — not trusting the LLM
to call a tool for it — unless the caller keeps talking: any later words that are not
themselves a goodbye cancel it, and if the caller or the agent is still speaking when
the time comes, the end waits for them (bounded). "Bye — oh wait, one more thing" in
one breath is a false goodbye and schedules nothing, and so is a farewell in a turn that
holds the call open (a caller saying goodbye because they mean to harm themselves: the
safety monitor escalates it; a goodbye already scheduled is called off). While the end is
scheduled, `conversation.goodbye_in_progress` holds the other layers back. Guidance that
names the emergency number gets the configured one (`EMERGENCY_NUMBER`), never another.
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
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession, CompletionReason
from call.conversation import Observation
from call.frames import EndCallFrame
from lib.prompts import render_prompt
from processors.conversation.quick_rules import QuickRules, quick_rules, render_guidance
from processors.llm_context import guidance_message

GOODBYE_DELAY_S = 3.5
# After the caller stops, how long their words may take to be transcribed.
TRANSCRIPT_GRACE_S = 1.5
# The longest the end waits for a speaker to finish once the delay is over.
MAX_HOLD_S = 15.0
POLL_S = 0.05


class QuickObserverProcessor(FrameProcessor):
    def __init__(
        self, session: CallSession, *, rules: QuickRules | None = None,
        goodbye_delay_s: float = GOODBYE_DELAY_S, emergency_number: str = "911", **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._emergency_number = emergency_number
        self._rules = rules or quick_rules()
        self._goodbye_delay_s = goodbye_delay_s
        self._goodbye: asyncio.Task | None = None
        self._user_speaking = False
        self._bot_speaking = False
        self._user_stopped_at = -1e9
        self._words_since_stop = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if (isinstance(frame, TranscriptionFrame) and direction is FrameDirection.DOWNSTREAM
                and frame.text.strip()):
            # Guidance goes in ahead of the words: the aggregator writes it before the
            # caller's message, whenever the turn ends.
            self._words_since_stop = True
            await self._observe(frame.text)
            await self.push_frame(frame, direction)
            return
        await self.push_frame(frame, direction)
        clock = self._session.conversation.clock
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._user_speaking = True
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._user_speaking = False
            self._user_stopped_at = clock()
            self._words_since_stop = False
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        elif isinstance(frame, InterimTranscriptionFrame):
            if frame.text.strip():
                await self._caller_kept_talking()
        elif isinstance(frame, TranscriptionFrame) and direction is FrameDirection.DOWNSTREAM:
            self._words_since_stop = True

    async def _observe(self, text: str) -> None:
        observation = self._rules.observe(text)
        conversation = self._session.conversation
        conversation.count_final_transcript()
        conversation.last_observation = (text, observation)
        if observation.goodbye != "strong":
            await self._caller_kept_talking()
        if observation.signals:
            conversation.tracker.add_topics([s.id for s in observation.signals
                                             if s.category not in ("goodbye", "engagement")])
        interrupted = conversation.take_interrupted_reply()
        if interrupted and not conversation.suspended:
            # The LLM is told what was cut off, by whom, and what they said now.
            await self.push_frame(guidance_message(render_prompt(
                "observers/interrupted.txt", cut_off=interrupted.replace('"', "'"))))
            self._session.log.event("interruption_context", cut_off_chars=len(interrupted))
        if observation.guidance and not conversation.suspended:
            await self.push_frame(guidance_message(render_guidance(
                observation.guidance, emergency_number=self._emergency_number)))
            self._session.log.event(
                "guidance", source="quick", categories=observation.categories,
                signals=observation.signal_ids, engagement=observation.engagement,
                tokens=observation.tokens,
            )
        if observation.holds_call:
            self._session.log.event("goodbye", action="held", why="safety signal")
        elif observation.false_goodbye:
            self._session.log.event("goodbye", strength="strong", action="taken_back")
        elif observation.goodbye == "strong" and self._goodbye is None:
            self._schedule_goodbye(observation)

    def _schedule_goodbye(self, observation: Observation) -> None:
        self._session.conversation.goodbye_in_progress = True
        self._session.log.event("goodbye", strength="strong", action="scheduled",
                                delay_s=self._goodbye_delay_s)
        self._goodbye = self.create_task(self._end_after_goodbye(), name="programmatic-goodbye")

    async def _caller_kept_talking(self) -> None:
        if self._goodbye is None:
            return
        task, self._goodbye = self._goodbye, None
        await self.cancel_task(task)
        self._session.conversation.goodbye_in_progress = False
        self._session.log.event("goodbye", strength="strong", action="cancelled",
                                why="caller kept talking")

    async def _end_after_goodbye(self) -> None:
        clock = self._session.conversation.clock
        await asyncio.sleep(self._goodbye_delay_s)
        deadline = clock() + MAX_HOLD_S
        while clock() < deadline and (
            self._user_speaking or self._bot_speaking
            or (not self._words_since_stop
                and clock() - self._user_stopped_at < TRANSCRIPT_GRACE_S)
        ):
            await asyncio.sleep(POLL_S)
        self._goodbye = None
        self._session.log.event("goodbye", strength="strong", action="ended")
        await self.push_frame(EndCallFrame(reason=CompletionReason.AGENT_HANGUP.value))

    async def cleanup(self) -> None:
        await super().cleanup()
        if self._goodbye is not None:
            await self.cancel_task(self._goodbye)
            self._goodbye = None
