"""Never leave a caller's turn in silence: the silent-reply watchdog.

After the guidance stripper, just before the voice: it sees the caller turn handed to
the agent (`LLMContextUserTurnFrame`, broadcast by the user aggregator), the reply's
words as they go to the voice (the engage LLM's, or the offline engine's line), tool
calls, and the agent's speaking frames coming back. The rules are
`processors/call_control/reply_watch.ReplyWatch`: a turn whose answer is not heard within
`bound_s` gets one retry (the same words again, the model asked again with a short note,
or one more wait while it is still being prepared), then a fallback line from
`prompts/fallback/silent_reply.txt`. A turn held for a human, a goodbye under way or an
ending call owe no answer. Each step is a `silent_reply` event.
"""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    FunctionCallCancelFrame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMContextUserTurnFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    StartFrame,
    UserStartedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection

from call.call_session import CallSession
from call.frames import EndCallFrame
from lib.prompts import render_prompt
from processors.call_control.reply_watch import ReplyWatch
from processors.voice.line_speaker_processor import LineSpeakerProcessor

POLL_S = 0.1


class ReplyWatchdogProcessor(LineSpeakerProcessor):
    def __init__(self, session: CallSession, *, bound_s: float, can_regenerate: bool,
                 poll_s: float = POLL_S, **kwargs) -> None:
        """`can_regenerate`: an engage LLM is there to ask again (offline, the engine's
        line is repeated or waited for instead)."""
        super().__init__(**kwargs)
        self._session = session
        self._watch = ReplyWatch(bound_s)
        self._can_regenerate = can_regenerate
        self._poll_s = poll_s
        self._speaking = False
        self._ticker: asyncio.Task | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        watch = self._watch
        now = self._session.conversation.clock()
        downstream = direction is FrameDirection.DOWNSTREAM
        if isinstance(frame, StartFrame):
            self._ticker = self.create_task(self._tick(), name="reply-watchdog")
        elif isinstance(frame, LLMContextUserTurnFrame) and downstream:
            watch.arm(now)
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._speaking = True
            if watch.words:
                watch.settle()  # the answer is being heard
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._speaking = False
        elif isinstance(frame, LLMFullResponseStartFrame) and downstream:
            watch.reply_started()
        elif isinstance(frame, LLMTextFrame) and downstream and frame.text.strip():
            watch.reply_words(frame.text)
            if self._speaking or not self._session.is_audio:
                watch.settle()  # heard along with what is playing, or a text session
        elif isinstance(frame, LLMFullResponseEndFrame) and downstream:
            watch.reply_ended()
        elif isinstance(frame, FunctionCallsStartedFrame) and downstream:
            for _ in frame.function_calls:
                watch.tool_started()
        elif isinstance(frame, (FunctionCallResultFrame, FunctionCallCancelFrame)) and downstream:
            watch.tool_done(now)
        elif isinstance(frame, (UserStartedSpeakingFrame, InterruptionFrame, EndCallFrame,
                                EndFrame)):
            watch.settle()  # the caller took the floor, or the call is ending

    def _owes_nothing(self) -> bool:
        conversation = self._session.conversation
        return conversation.holding_back or self._session.completion_reason is not None

    async def _tick(self) -> None:
        conversation = self._session.conversation
        watch = self._watch
        while True:
            await asyncio.sleep(self._poll_s)
            if not watch.watching:
                continue
            if self._owes_nothing():
                watch.settle()
                continue
            now = conversation.clock()
            waited_s = round(now - watch.armed_at, 1) if watch.armed_at is not None else 0.0
            step = watch.due(now)
            if step == "retry":
                await self._retry(waited_s)
            elif step == "fallback":
                self._session.log.event("silent_reply", step="fallback", waited_s=waited_s)
                await self.say_line(render_prompt("fallback/silent_reply.txt"), own_line=True)

    async def _retry(self, waited_s: float) -> None:
        watch = self._watch
        path = watch.retry_path(can_regenerate=self._can_regenerate)
        self._session.log.event("silent_reply", step="retry", path=path, waited_s=waited_s)
        if path == "repeat":
            await self.say_line(watch.text())  # its words stay noted: heard, it settles
        elif path == "regenerate":
            # To the assistant aggregator at the end, which runs the model on the context.
            await self.push_frame(LLMMessagesAppendFrame(
                messages=[{"role": "user", "content": render_prompt(
                    "observers/silent_retry.txt")}], run_llm=True))

    async def cleanup(self) -> None:
        await super().cleanup()
        if self._ticker is not None and not self._ticker.done():
            await self.cancel_task(self._ticker)
