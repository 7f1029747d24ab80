"""Never silence when there is no LLM: an honest callback offer instead.

Sits just before the LLM slot. With no LLM configured it *is* the responder: it
answers each caller turn from `prompts/fallback/`, offers a call back, understands
the yes/no answer and ends the call politely. With a cloud LLM it passes context
through, and if the LLM reports an error for a turn it takes over for the rest of
the call, so a bad key or an outage never leaves the caller in silence.

A yes is a real call back (`db.call_backs`: the request and its task, written together)
and the caller hears when it will come; when it cannot be written they hear that no
call is arranged. With no way to arrange one (`call_backs` None) none is offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from loguru import logger
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMContextFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from db.call_backs import CALLBACK_PRIORITY, URGENT_PRIORITY, CallBackAsk, CallBacks
from language.affirmation import Answer, classify_answer
from lib.prompts import render_prompt
from processors.llm_context import last_user_text
from processors.voice.line_speaker_processor import LineSpeakerProcessor

# Why the team calls back, as the request and its task say it.
CALL_BACK_REASON = "the agent could not help (no LLM available)"


class _Step(StrEnum):
    OFFER = "offer"
    AWAIT_ANSWER = "await_answer"
    ASKED_AGAIN = "asked_again"
    DONE = "done"


@dataclass(frozen=True)
class Said:
    """The dialogue's next line (`prompts/fallback/<line>.txt`) and whether the call then
    ends; `call_back`: the caller said yes, so the call back is asked for first and the
    line says how that went."""

    line: str
    end_call: bool
    call_back: bool = False


class CallbackDialogue:
    """The offer-a-callback conversation, as plain logic (no frames, no I/O)."""

    def __init__(self, clinic_name: str, *, can_call_back: bool = True) -> None:
        self._clinic = clinic_name
        self._can_call_back = can_call_back
        self.step = _Step.OFFER

    def reply(self, caller_text: str) -> Said:
        """The agent's reply to a caller turn."""
        if self.step is _Step.OFFER:
            if not self._can_call_back:  # nothing to offer: say so and end politely
                self.step = _Step.DONE
                return Said("cannot_help", end_call=True)
            self.step = _Step.AWAIT_ANSWER
            return Said("offer_callback", end_call=False)
        if self.step is _Step.DONE:
            return Said("callback_declined", end_call=True)
        answer = classify_answer(caller_text)
        if answer is Answer.YES:
            self.step = _Step.DONE
            return Said("callback_confirmed", end_call=True, call_back=True)
        if answer is Answer.NO:
            self.step = _Step.DONE
            return Said("callback_declined", end_call=True)
        if self.step is _Step.AWAIT_ANSWER:
            self.step = _Step.ASKED_AGAIN
            return Said("ask_again", end_call=False)
        self.step = _Step.DONE
        return Said("unclear_goodbye", end_call=True)

    def say(self, line: str, **values: str) -> str:
        return render_prompt(f"fallback/{line}.txt", clinic_name=self._clinic, **values)


class FallbackResponderProcessor(LineSpeakerProcessor):
    """Answers caller turns itself when no LLM is available (from the start or after a failure)."""

    def __init__(self, session: CallSession, *, llm_available: bool,
                 call_backs: CallBacks | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._active = not llm_available
        self._call_backs = call_backs
        self._dialogue = CallbackDialogue(session.clinic_name,
                                          can_call_back=call_backs is not None)
        self._pending_context: LLMContextFrame | None = None
        if self._active:
            session.log.event("llm_unavailable", reason="no LLM provider configured")

    @property
    def active(self) -> bool:
        return self._active

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and direction is FrameDirection.DOWNSTREAM:
            if self._active:
                await self._respond(last_user_text(frame))
                return
            self._pending_context = frame
        elif (
            isinstance(frame, ErrorFrame)
            and direction is FrameDirection.UPSTREAM
            and isinstance(frame.processor, LLMService)  # a TTS or transport error is not ours
            and not self._active
            and self._pending_context is not None
        ):
            await self.push_frame(frame, direction)
            await self._take_over(frame)
            return
        await self.push_frame(frame, direction)

    async def _take_over(self, error: ErrorFrame) -> None:
        """The LLM failed this turn: answer it ourselves and stay in charge."""
        self._active = True
        logger.warning(f"call {self._session.call_id}: LLM failed, switching to fallback responder")
        self._session.log.event("llm_unavailable", reason="llm error", error=str(error.error)[:300])
        context, self._pending_context = self._pending_context, None
        await self._respond(last_user_text(context) if context else "")

    async def _respond(self, caller_text: str) -> None:
        said = self._dialogue.reply(caller_text)
        text = await self._call_back() if said.call_back else self._dialogue.say(said.line)
        await self.say_line(text)
        if said.end_call:
            await self.push_frame(EndCallFrame(reason=CompletionReason.AGENT_HANGUP.value))

    async def _call_back(self) -> str:
        """Ask for the call back the caller said yes to: promised with its time when its
        task was written, else they hear that no call is arranged (never silence)."""
        log, call_backs = self._session.log, self._call_backs
        log.event("callback_requested", source="fallback_responder")
        if call_backs is None:  # not offered without them; never promised either
            return self._dialogue.say("callback_failed")
        urgent = log.escalations > 0  # the call raised a safety concern: called back first
        try:
            called = await call_backs.request(CallBackAsk(
                reason=CALL_BACK_REASON, urgent=urgent,
                priority=URGENT_PRIORITY if urgent else CALLBACK_PRIORITY,
                written_by="fallback_responder"))
        except Exception as error:  # noqa: BLE001 - a failed write is said, never a promise
            logger.warning(f"call {self._session.call_id}: call back not arranged "
                           f"({type(error).__name__})")
            log.event("call_not_arranged", source="fallback_responder",
                      error=type(error).__name__)
            return self._dialogue.say("callback_failed")
        if not called.promised:
            log.event("call_not_arranged", source="fallback_responder", why=called.why_not)
            return self._dialogue.say("callback_failed")
        plan = called.plan
        log.event("call_back_promised", source="fallback_responder", task_id=called.task_id,
                  at=plan.at.isoformat() if plan.at else None)
        return self._dialogue.say("callback_confirmed",
                                  call_time=plan.when(call_backs.now()))
