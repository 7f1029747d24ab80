"""Checks on a caller who has gone quiet, and ends the call if they never answer.

Before the user aggregator, where the caller's words pass downstream and both sides'
speaking frames pass upstream. Silence is counted while nobody speaks; at each check-in
(10 s, 20 s, 40 s: processors/conversation/silence_schedule.py) the agent says a short line from
`prompts/silence/`, and after three unanswered ones it says goodbye and hangs up
(`caller_silent`). A goodbye in progress or a call handed to a human holds it back.
Each check-in and the hang-up are `silence_checkin` / `silence_hangup` events.
"""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    StartFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from lib.prompts import render_prompt
from processors.conversation.silence_schedule import SilenceSchedule
from processors.voice.line_speaker_processor import LineSpeakerProcessor

POLL_S = 0.25


class SilenceMonitorProcessor(LineSpeakerProcessor):
    def __init__(
        self, session: CallSession, *, schedule: SilenceSchedule | None = None,
        poll_s: float = POLL_S, **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._schedule = schedule or SilenceSchedule()
        self._poll_s = poll_s
        self._ticker: asyncio.Task | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        now = self._session.conversation.clock()
        schedule = self._schedule
        if isinstance(frame, StartFrame):
            schedule.activity(now)
            self._ticker = self.create_task(self._watch(), name="silence-monitor")
        elif isinstance(frame, (BotStartedSpeakingFrame, VADUserStartedSpeakingFrame)):
            schedule.activity(now, speaking=True)
        elif isinstance(frame, (BotStoppedSpeakingFrame, VADUserStoppedSpeakingFrame)):
            schedule.activity(now, speaking=False)
        elif isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            if frame.text.strip() and direction is FrameDirection.DOWNSTREAM:
                schedule.caller_answered(now)

    async def _watch(self) -> None:
        conversation = self._session.conversation
        while not self._schedule.done:
            await asyncio.sleep(self._poll_s)
            now = conversation.clock()
            if conversation.holding_back:
                self._schedule.activity(now)  # count again from when it lets go
                continue
            due = self._schedule.due(now)
            if due is None:
                continue
            silent_s = round(now - self._schedule.last_activity, 1)
            self._schedule.said(due, now)
            if due == "checkin":
                number = self._schedule.unanswered
                self._session.log.event("silence_checkin", number=number, silent_s=silent_s)
                await self.say_line(render_prompt(f"silence/checkin_{min(number, 3)}.txt"),
                                    own_line=True)
            else:
                self._session.log.event("silence_hangup", checkins=self._schedule.unanswered,
                                        silent_s=silent_s)
                await self.say_line(render_prompt("silence/goodbye.txt"), own_line=True)
                await self.push_frame(
                    EndCallFrame(reason=CompletionReason.CALLER_SILENT.value))

    async def cleanup(self) -> None:
        await super().cleanup()
        if self._ticker is not None and not self._ticker.done():
            await self.cancel_task(self._ticker)
