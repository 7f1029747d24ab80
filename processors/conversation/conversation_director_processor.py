"""The conversation director in the call: advice from the side, never on the voice path.

Between the quick observer and the user aggregator. On each final transcript it

1. appends the *previous* turn's cached guidance (`[Director guidance] main/medium/warm
   | …`) to the LLM context without an LLM run of its own, just ahead of the words
   (so the aggregator writes it before the caller's message), and
2. starts the analysis of *this* turn in the background (processors/conversation/director:
   the fast model, or the rules offline). Nothing waits for it: a slow or failed
   analysis (a timeout, an error, junk) only means the next turn has no guidance.

Time fallbacks run on their own timer: winding down at `wind_down_s` (9 min); at the
time limit `force_end_s` (12 min) the context graph's `time_limit` policy
(processors/conversation/time_limit.py): a person from the team is asked to take over
(`escalate`, put through when there is a transfer number), the caller is offered a call
back (`offer_callback`: a yes writes the call back's task and ends the call telling them
when it will come; a task that could not be written is said so, the team is asked to
help and the call goes on; a no goes on), or a short closing line and the end 3 s later
(`end`). A call that raised a safety escalation is never ended or offered a call back at
the limit, nor is one that has no way to arrange a call back (`call_backs` None). When the analysis calls
the phase closing after `closing_end_s` (8 min), the end 5 s later. A goodbye in progress
or a call handed to a human holds all of this back. Every decision is a `director` event.
"""

from __future__ import annotations

import asyncio
import time

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    StartFrame,
    TranscriptionFrame,
)
from pipecat.processors.frame_processor import FrameDirection

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from db.call_backs import CallBackAsk, CallBacks
from processors.conversation.director import (
    DirectorBackend,
    DirectorView,
    condense,
    director_lines,
    hold_wind_down,
)
from processors.conversation.quick_rules import QuickRules, quick_rules
from processors.conversation.time_limit import (
    DEFAULT_TIME_LIMIT,
    TIME_LIMIT_CONCEPT,
    TimeLimitPolicy,
    offer_answers,
    time_limit_step,
)
from processors.llm_context import guidance_message
from processors.voice.line_speaker_processor import LineSpeakerProcessor

FORCE_END_DELAY_S = 3.0
CLOSING_END_DELAY_S = 5.0
DEFAULT_TIMEOUT_S = 3.0


class ConversationDirectorProcessor(LineSpeakerProcessor):
    def __init__(
        self, session: CallSession, backend: DirectorBackend, *,
        timeout_s: float = DEFAULT_TIMEOUT_S, wind_down_s: float = 540.0,
        force_end_s: float = 720.0, closing_end_s: float = 480.0,
        time_limit: TimeLimitPolicy = DEFAULT_TIME_LIMIT, transfer_number: str | None = None,
        rules: QuickRules | None = None, call_backs: CallBacks | None = None, **kwargs,
    ) -> None:
        """`time_limit`: the call's context graph policy at `force_end_s`;
        `transfer_number`: where an escalated call is put through (None: the team is
        asked to take over and the agent keeps helping); `call_backs`: how a call back
        the caller accepts is arranged (None: none is offered)."""
        super().__init__(**kwargs)
        self._session = session
        self._backend = backend
        self._timeout_s = timeout_s
        self._wind_down_s = wind_down_s
        self._force_end_s = force_end_s
        self._closing_end_s = closing_end_s
        self._time_limit = time_limit
        self._transfer_number = transfer_number
        self._rules = rules or quick_rules()
        self._call_backs = call_backs
        self._cached: str | None = None
        self._analysis: asyncio.Task | None = None
        self._fallbacks: asyncio.Task | None = None
        self._ending = False
        self._callback_offered = False  # waiting for the answer to the call-back offer

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if (isinstance(frame, TranscriptionFrame) and direction is FrameDirection.DOWNSTREAM
                and frame.text.strip()):
            await self._on_turn(frame)  # the cached guidance goes in ahead of the words
            return
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self._fallbacks = self.create_task(self._time_fallbacks(), name="director-time")

    async def _on_turn(self, frame: TranscriptionFrame) -> None:
        text = frame.text
        conversation = self._session.conversation
        offered, self._callback_offered = self._callback_offered, False
        if conversation.holding_back:
            self._cached = None
            await self.push_frame(frame)
            return
        if offered and await self._answered_offer(text):
            return  # the answer to the director's own question is not the agent's turn
        if self._cached:
            line, self._cached = self._cached, None
            await self.push_frame(guidance_message(f"[Director guidance] {line}"))
            self._session.log.event("director", action="guidance", guidance=line)
        await self.push_frame(frame)
        if self._analysis is not None and not self._analysis.done():
            await self.cancel_task(self._analysis)  # this turn's view is newer
        seen = conversation.last_observation
        observation = seen[1] if seen and seen[0] == text else self._rules.observe(text)
        view = DirectorView(
            clinic_name=self._session.clinic_name, latest=text,
            observation=observation, tracker=conversation.tracker,
            elapsed_s=conversation.elapsed_s(), winding_down=conversation.winding_down,
        )
        self._analysis = self.create_task(self._analyze(view), name="director-analysis")

    async def _analyze(self, view: DirectorView) -> None:
        started = time.perf_counter()
        try:
            analysis = await asyncio.wait_for(self._backend.analyze(view), self._timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - no guidance is the fallback
            reason = "timeout" if isinstance(error, TimeoutError) else type(error).__name__
            logger.debug(f"call {self._session.call_id}: director gave no guidance ({reason})")
            self._session.log.event("director", action="no_guidance", why=reason,
                                    backend=self._backend.name)
            return
        ms = round((time.perf_counter() - started) * 1000)
        # The timer may have begun the wind-down while the analysis ran.
        analysis = hold_wind_down(
            analysis, view.winding_down or self._session.conversation.winding_down)
        self._cached = condense(analysis)
        a = analysis.analysis
        self._session.log.event(
            "director", action="analysis", backend=self._backend.name, ms=ms,
            phase=a.call_phase, engagement=a.engagement_level, tone=analysis.guidance.tone,
            stay_or_shift=analysis.direction.stay_or_shift, max_tokens=
            analysis.model_recommendation.max_tokens,
        )
        if (a.call_phase == "closing" and view.elapsed_s >= self._closing_end_s
                and not self._session.conversation.holding_back):
            await self._end("closing", CLOSING_END_DELAY_S, line=None)

    async def _time_fallbacks(self) -> None:
        conversation = self._session.conversation
        await asyncio.sleep(max(0.0, self._wind_down_s - conversation.elapsed_s()))
        if not conversation.holding_back and not conversation.winding_down:
            conversation.winding_down = True
            line = f"winding_down/medium/gentle | WINDING DOWN: {director_lines().winding_down}"
            await self.push_frame(guidance_message(f"[Director guidance] {line}"))
            self._session.log.event("director", action="force_winding_down",
                                    after_s=round(conversation.elapsed_s()))
        while True:
            await asyncio.sleep(max(0.0, self._force_end_s - conversation.elapsed_s()))
            if not conversation.holding_back:
                await self._at_time_limit()
                return
            await asyncio.sleep(1.0)  # a human has the call, or it is ending: look again

    async def _at_time_limit(self) -> None:
        """The graph's policy at the time limit, made more careful by the call so far."""
        session = self._session
        step = time_limit_step(self._time_limit, escalated=session.log.escalations > 0,
                               can_transfer=self._transfer_number is not None
                               and session.transfer_to is None,
                               can_call_back=self._call_backs is not None)
        session.log.event("director", action="time_limit", policy=self._time_limit, step=step,
                          after_s=round(session.conversation.elapsed_s()))
        lines = director_lines().time_limit
        if step == "end":
            await self._end("time_limit", FORCE_END_DELAY_S, line=director_lines().force_end)
        elif step == "offer_callback":
            self._callback_offered = True
            await self.say_line(lines["offer_callback"], own_line=True)
        else:
            session.log.escalation(TIME_LIMIT_CONCEPT, "soft", similarity=None, judge=None,
                                   reason="the call reached its time limit")
            await self.say_line(lines[step], own_line=True)
            if step == "transfer" and session.request_transfer(
                    self._transfer_number, why="time_limit"):
                await self.push_frame(EndCallFrame(reason=CompletionReason.TRANSFERRED.value))

    async def _answered_offer(self, text: str) -> bool:
        """The caller's reply to the call-back offer: True when it answered it (a yes
        arranges the call back and ends the call saying when it will come, a no goes on);
        anything else is their conversation going on and goes to the agent."""
        answer = offer_answers().answer(text)
        session = self._session
        session.log.event("director", action="callback_offer", answer=answer)
        lines = director_lines().time_limit
        if answer == "not_answered":
            return False
        if answer == "declined":
            await self.say_line(lines["carry_on"], own_line=True)
            return True
        session.log.event("callback_requested", source="time_limit")
        when = await self._arrange_call_back()
        session.log.escalation(
            TIME_LIMIT_CONCEPT, "soft", similarity=None, judge=None,
            reason="the caller asked to be called back" if when is not None
            else "the caller asked to be called back, but no call back could be arranged")
        if when is None:  # never a promise: the team helps and the call goes on
            await self.say_line(lines["callback_failed"], own_line=True)
            return True
        await self.say_line(lines["callback_confirmed"].format(call_time=when), own_line=True)
        await self.push_frame(EndCallFrame(reason=CompletionReason.AGENT_HANGUP.value))
        return True

    async def _arrange_call_back(self) -> str | None:
        """The call back's task, written; when it will come as the caller hears it (None:
        none was arranged, and the record says why)."""
        log, call_backs = self._session.log, self._call_backs
        if call_backs is None:
            log.event("call_not_arranged", source="time_limit", why="no call backs")
            return None
        try:
            called = await call_backs.request(CallBackAsk(
                reason="the call reached its time limit", message="finish what the call began",
                written_by="director:time_limit"))
        except Exception as error:  # noqa: BLE001 - a failed write is said, never a promise
            logger.warning(f"call {self._session.call_id}: call back not arranged "
                           f"({type(error).__name__})")
            log.event("call_not_arranged", source="time_limit", error=type(error).__name__)
            return None
        if not called.promised:
            log.event("call_not_arranged", source="time_limit", why=called.why_not)
            return None
        plan = called.plan
        log.event("call_back_promised", source="time_limit", task_id=called.task_id,
                  at=plan.at.isoformat() if plan.at else None)
        return plan.when(call_backs.now())

    async def _end(self, why: str, delay_s: float, *, line: str | None) -> None:
        if self._ending:
            return
        self._ending = True
        self._session.log.event("director", action="force_end", why=why, delay_s=delay_s,
                                after_s=round(self._session.conversation.elapsed_s()))
        try:
            await asyncio.sleep(delay_s)
        except asyncio.CancelledError:
            self._ending = False  # the caller spoke again: a later fallback may still end it
            raise
        if self._session.conversation.suspended:
            self._ending = False
            return
        if line:
            await self.say_line(line, own_line=True)
        await self.push_frame(EndCallFrame(reason=CompletionReason.AGENT_HANGUP.value))

    async def cleanup(self) -> None:
        await super().cleanup()
        for task in (self._analysis, self._fallbacks):
            if task is not None and not task.done():
                await self.cancel_task(task)
