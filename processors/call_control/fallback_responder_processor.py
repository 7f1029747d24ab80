"""Never silence when there is no LLM: an honest callback offer instead.

Sits just before the LLM slot. With no LLM configured it *is* the responder: it
answers each caller turn from `prompts/fallback/`, offers a call back, understands
the yes/no answer and ends the call politely. With a cloud LLM it passes context
through, and if the LLM reports an error for a turn it takes over for the rest of
the call, so a bad key or an outage never leaves the caller in silence.
"""

from __future__ import annotations

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
from language.affirmation import Answer, classify_answer
from lib.prompts import render_prompt
from processors.llm_context import last_user_text
from processors.voice.line_speaker_processor import LineSpeakerProcessor


class _Step(StrEnum):
    OFFER = "offer"
    AWAIT_ANSWER = "await_answer"
    ASKED_AGAIN = "asked_again"
    DONE = "done"


class CallbackDialogue:
    """The offer-a-callback conversation, as plain logic (no frames)."""

    def __init__(self, clinic_name: str) -> None:
        self._clinic = clinic_name
        self.step = _Step.OFFER
        self.callback_requested = False

    def reply(self, caller_text: str) -> tuple[str, bool]:
        """The agent's reply to a caller turn, and whether the call should then end."""
        if self.step is _Step.OFFER:
            self.step = _Step.AWAIT_ANSWER
            return self._say("fallback/offer_callback.txt"), False
        if self.step is _Step.DONE:
            return self._say("fallback/callback_declined.txt"), True
        answer = classify_answer(caller_text)
        if answer is Answer.YES:
            self.step = _Step.DONE
            self.callback_requested = True
            return self._say("fallback/callback_confirmed.txt"), True
        if answer is Answer.NO:
            self.step = _Step.DONE
            return self._say("fallback/callback_declined.txt"), True
        if self.step is _Step.AWAIT_ANSWER:
            self.step = _Step.ASKED_AGAIN
            return self._say("fallback/ask_again.txt"), False
        self.step = _Step.DONE
        return self._say("fallback/unclear_goodbye.txt"), True

    def _say(self, prompt: str) -> str:
        return render_prompt(prompt, clinic_name=self._clinic)


class FallbackResponderProcessor(LineSpeakerProcessor):
    """Answers caller turns itself when no LLM is available (from the start or after a failure)."""

    def __init__(self, session: CallSession, *, llm_available: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._active = not llm_available
        self._dialogue = CallbackDialogue(session.clinic_name)
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
        text, end_call = self._dialogue.reply(caller_text)
        await self.say_line(text)
        if self._dialogue.callback_requested:
            self._session.log.event("callback_requested", source="fallback_responder")
            self._dialogue.callback_requested = False
        if end_call:
            await self.push_frame(EndCallFrame(reason=CompletionReason.AGENT_HANGUP.value))
