"""Emotional steering of the engage LLM, per caller turn.

Before the graph navigator. On each caller turn it:
- notes the reply for the behavioural signals (a streak of very short replies);
- tags the caller's message in the context with how they sounded, `[VOICE: Anxiety,
  valence=-0.312]` — it stays in the history, so the model sees the trajectory (the
  navigator and other readers strip it: `strip_voice_tag`);
- refreshes the session-level block of the system instruction (dominant emotion, trend,
  the matrix's instruction, signals, call-phase urgency, masking) with an
  `LLMUpdateSettingsFrame` ahead of the turn, and records each change as a `steering`
  event, so the call record shows what the agent was told even when no LLM runs.
Too little heard (fewer than 2 segments): no tag, and the base instruction.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, LLMContextFrame, LLMUpdateSettingsFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.settings import LLMSettings

from call.call_session import CallSession
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.steering import annotation, session_steering
from processors.llm_context import is_caller_turn, last_user_text


class EmotionSteeringProcessor(FrameProcessor):
    def __init__(self, session: CallSession, emotion: CallEmotion, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._emotion = emotion

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if (isinstance(frame, LLMContextFrame) and direction is FrameDirection.DOWNSTREAM
                and is_caller_turn(frame.context)):
            await self._steer(frame)
        await self.push_frame(frame, direction)

    async def _steer(self, frame: LLMContextFrame) -> None:
        emotion = self._emotion
        emotion.state.note_reply(last_user_text(frame))
        snapshot = emotion.snapshot()
        emotion.note_turn(snapshot)
        tag = annotation(snapshot)
        if tag is not None:
            message = frame.context.get_messages()[-1]
            if isinstance(message.get("content"), str):
                message["content"] = f"{message['content']} {tag}"
        steering = session_steering(snapshot, emotion.elapsed_s())
        text = steering.text if steering is not None else None
        if text == emotion.steering:
            return
        emotion.steering = text
        self._session.instruction.update("steering", text)
        await self.push_frame(LLMUpdateSettingsFrame(
            delta=LLMSettings(system_instruction=self._session.instruction.text)))
        self._session.log.event(
            "steering", dominant=snapshot.dominant, trend=snapshot.trend.value,
            tone=steering.response.tone if steering else None,
            urgency=steering.urgency if steering else None,
            masking=steering.masking if steering else False, text=text,
        )
