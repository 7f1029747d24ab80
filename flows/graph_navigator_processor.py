"""The context-graph navigator in the pipeline: each caller turn navigated, then answered.

Between the user aggregator and the LLM. Each caller turn (the aggregator's context
frame ending in the caller's words) goes to the call's `GraphEngine`, which
navigates to the action to speak. Then either

- no LLM (offline): the engine's spoken line is pushed downstream as an LLM response
  would be, so the TTS, the recorder and the call controller treat it like any other,
  and the context frame goes no further; or
- an engage LLM: the decision becomes a `pipecat.flows` node (flows/compile), which the
  Flows manager enters — the state's task and tools into the context, then an LLM run,
  whose context frame passes through here untouched. A filler the navigator produced
  is spoken at once, while the LLM works.

The terminal state ends the call once its goodbye has been said. If the engine fails
(the graph cannot be walked) the turn, and every turn after it, passes on to what
follows (the LLM, or the fallback responder when there is none): static prompt mode,
recorded, never silence.

The engine's prefetch starts with the pipeline and is awaited (bounded) only by the
first caller turn, so the greeting never waits for the database.
"""

from __future__ import annotations

import asyncio
import time

from loguru import logger
from pipecat.flows import FlowManager
from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMRunFrame,
    LLMUpdateSettingsFrame,
    StartFrame,
    TTSSpeakFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import LLMSettings

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame, NavigationFrame
from flows.compile import EngageNodes
from flows.graph_engine import GraphEngine
from flows.navigator import NavDecision
from language.affirmation import Answer, classify_answer
from language.fields import digits_in
from lib.prompts import render_prompt
from processors.emotion.call_emotion import CallEmotion
from processors.llm_context import is_caller_turn, last_user_text
from processors.voice.line_speaker_processor import LineSpeakerProcessor
from processors.world.audio_check import (
    MIN_AUDIO_S,
    AudioCheck,
    AudioVerifier,
    guidance,
)

PREFETCH_WAIT_S = 2.5
AUDIO_CHECK_TIMEOUT_S = 2.5


def _field_name(kind: str) -> str:
    return {"date": "date of birth", "phone": "phone number", "member_id": "member ID",
            "name": "name"}[kind]


class GraphNavigatorProcessor(LineSpeakerProcessor):
    def __init__(self, session: CallSession, engine: GraphEngine, *,
                 emotion: CallEmotion | None = None,
                 audio_verifier: AudioVerifier | None = None,
                 audio_timeout_s: float = AUDIO_CHECK_TIMEOUT_S, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._engine = engine
        self._emotion = emotion
        self._audio_verifier = audio_verifier
        self._audio_timeout_s = audio_timeout_s
        self._started: asyncio.Task | None = None
        self._flows: FlowManager | None = None
        self._nodes = EngageNodes(engine, end_call=self._end_after_goodbye)

    def engage_with(self, flows: FlowManager) -> None:
        """An LLM speaks for the agent: each decision becomes the Flows node it runs."""
        self._flows = flows

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            if self._flows is not None:
                await self._flows.initialize()
            self._started = self.create_task(self._engine.start(), name="graph-prefetch")
        elif (
            isinstance(frame, LLMContextFrame)
            and direction is FrameDirection.DOWNSTREAM
            and not self._engine.failed
            and is_caller_turn(frame.context)
        ):
            answered = (await self._engage(last_user_text(frame), frame.context)
                        if self._flows is not None
                        else await self._answer(last_user_text(frame)))
            if answered:
                return
        await self.push_frame(frame, direction)

    async def _answer(self, caller_text: str) -> bool:
        """Answer the turn with the offline lines (False: the engine failed, let it through)."""
        await self._wait_for_prefetch()
        check = await self._check_audio(caller_text)
        read_back = ""
        if check is not None:
            if check.band in ("repeat", "spell"):  # ask again; the question stays open
                await self.say_line(render_prompt(
                    f"world/verify_{check.band}.txt", field=_field_name(check.kind)))
                return True
            caller_text = check.said
            if check.band == "confirm":
                read_back = render_prompt("world/verify_confirm.txt", value=caller_text) + " "
        if not self._engine.navigates_by_model:
            await self._offer_filler(None, kind="offline_turn")
        started = time.perf_counter()
        try:
            reply = await self._engine.turn(caller_text, filler=self._model_filler)
        except Exception as error:  # noqa: BLE001 - never silence: static prompt mode instead
            self._static_from_here(error)
            return False
        if self._emotion is not None and not self._engine.navigates_by_model:
            self._emotion.latency.observe(
                "offline_turn", (time.perf_counter() - started) * 1000)
        if self._engine.failed or not reply.text:
            if not self._engine.failed:
                self._engine.failed = True
                self._session.log.event("context_graph_failed", reason="empty reply")
            logger.warning(f"call {self._session.call_id}: static prompt mode from here on")
            return False
        last = reply.decisions[-1]
        await self._navigated(reply.nav_ms, last)
        await self._refresh_world(push=False)
        await self.say_line(read_back + reply.text)
        if reply.transfer_to:
            self._transfer(reply.transfer_to, last.state)
        if reply.end_call:
            await self.push_frame(EndCallFrame(reason=self._end_reason().value))
        return True

    async def _engage(self, caller_text: str, context: LLMContext) -> bool:
        """Navigate, then let the engage LLM speak the chosen action in its Flows node."""
        await self._wait_for_prefetch()
        check = await self._check_audio(caller_text)
        if check is not None:
            # The LLM is told what the audio check found, beside the caller's words.
            messages = context.get_messages()
            context.set_messages(messages[:-1] + [
                {"role": "user", "content": guidance(check)}, messages[-1]])
            if check.band == "use":
                caller_text = check.said
        try:
            decision, nav_ms = await self._engine.navigate_turn(
                caller_text, filler=self._model_filler)
        except Exception as error:  # noqa: BLE001 - never silence: static prompt mode instead
            self._static_from_here(error)
            return False
        conversation = self._session.conversation
        if conversation.final_transcripts > conversation.answering:
            # Newer words came in while the navigator decided: answer those instead
            # (supersede guard, stage 1, just before the LLM would be paid for).
            self._session.log.event("superseded_reply", stage="pre_generation",
                                    newer_turns=conversation.final_transcripts
                                    - conversation.answering, after="navigation")
            return True
        await self._navigated(nav_ms, decision)
        await self._refresh_world(push=True)
        if not decision.filler_said:  # the LLM is next: a filler if its wait is long
            await self._offer_filler(decision.filler, kind="engage_llm",
                                     verifying=decision.verify_audio)
        self.create_task(self._enter(decision), name="flows-node")
        return True

    async def _enter(self, decision: NavDecision) -> None:
        """Flows sets the node's task and tools, then runs the LLM (awaited off the frame
        path: the node's frames enter at the pipeline source and pass this processor)."""
        assert self._flows is not None
        if self._emotion is not None:
            self._emotion.reply_requested_at = self._emotion.clock()
        try:
            await self._flows.set_node_from_config(self._nodes.node(decision))
        except Exception as error:  # noqa: BLE001 - the LLM answers in static prompt mode
            self._static_from_here(error)
            await self.queue_frame_at_source(LLMRunFrame())

    async def _check_audio(self, caller_text: str) -> AudioCheck | None:
        """Hear the caller's last turn again when it answers a question for a name, a
        date, a phone number or a member id (the graph's `captures`). A filler covers
        the wait; a timeout or an error means no check, and the call goes on."""
        kind = self._engine.expected_field()
        verifier = self._audio_verifier
        pcm = self._session.turn_audio.last_turn
        sample_rate = self._session.turn_audio.sample_rate
        if (kind is None or verifier is None or not self._session.is_audio
                or not verifier.supports(kind) or len(pcm) < MIN_AUDIO_S * sample_rate * 2
                or kind == "phone" and yes_or_no_without_a_number(caller_text)):
            return None
        await self._offer_filler(None, kind="audio_verification", verifying=True)
        started = time.perf_counter()
        try:
            check = await asyncio.wait_for(verifier.check(
                pcm, sample_rate, caller_text, kind,
                list(self._session.voice.correction_categories)), self._audio_timeout_s)
        except Exception as error:  # noqa: BLE001 - the transcript as heard, then
            self._session.log.event("audio_verification", field=kind, provider=verifier.name,
                                    outcome="unavailable", error=type(error).__name__)
            return None
        if self._emotion is not None:  # how long the next filler must cover
            self._emotion.latency.observe(
                "audio_verification", (time.perf_counter() - started) * 1000)
        self._session.log.event(
            "audio_verification", field=kind, provider=verifier.name, outcome=check.band,
            corrections=[{"heard": c.heard, "corrected": c.corrected,
                          "confidence": c.confidence} for c in check.corrections],
            both_wrong=check.both_wrong)
        return check

    async def _refresh_world(self, *, push: bool) -> None:
        """The ambient block of the system instruction, kept current: the chart reloaded
        after a write or a new identification, and the instruction replaced when its text
        changed (`push`: an LLM is there to receive it). Recorded without the contents."""
        await self._engine.refresh_chart()
        text = self._engine.ambient()
        if not self._session.instruction.update("world", text):
            return
        self._session.log.event(
            "world_context", chars=len(text),
            identified=self._engine.session.patient is not None)
        if push:
            await self.push_frame(LLMUpdateSettingsFrame(
                delta=LLMSettings(system_instruction=self._session.instruction.text)))

    async def _end_after_goodbye(self, _action: dict, _flow_manager: FlowManager) -> None:
        """The terminal node's goodbye has played: transfer if asked, then hang up."""
        if self._engine.session.handoff_to:
            self._transfer(self._engine.session.handoff_to, self._engine.state)
        await self.queue_frame_at_source(EndCallFrame(reason=self._end_reason().value))

    async def queue_frame_at_source(self, frame: Frame) -> None:
        await self.pipeline_worker.queue_frame(frame)

    async def _model_filler(self, text: str) -> None:
        """The navigator model's filler (the first it gave this turn), offered at once."""
        await self._offer_filler(text, kind="navigator_model", from_model=True)

    async def _offer_filler(
        self, text: str | None, *, kind: str, from_model: bool = False, verifying: bool = False,
    ) -> None:
        """Say a filler if the wait ahead of `kind` is long and the caller's state allows
        one (processors/emotion/fillers.py); without the emotion layer, what was offered."""
        emotion = self._emotion
        if emotion is None:
            if text:
                self._session.log.event("filler", said=text, register=None, why="offered")
                await self._say(text)
            return
        decision = emotion.fillers.decide(
            emotion.snapshot(), expected_ms=emotion.latency.expected_ms(kind),
            enabled=self._session.voice.fillers_enabled,
            proposed=text if from_model else None, hint=None if from_model else text,
            verifying=verifying,
        )
        if decision.say is None and decision.register != "suppressed":
            return  # no wait to cover, or fillers off: nothing worth a record
        self._session.log.event("filler", said=decision.say, register=decision.register,
                                why=decision.why)
        if decision.say:
            await self._say(decision.say)

    async def _say(self, filler: str) -> None:
        """A filler phrase, spoken at once; kept out of the LLM's context. Not in a text
        session: there is no silence to cover, and Pipecat holds unspoken replies back
        behind audio still playing."""
        if self._skip_tts:
            return
        await self.push_frame(TTSSpeakFrame(filler, append_to_context=False))

    async def _navigated(self, nav_ms: float, decision: NavDecision) -> None:
        intent = self._engine.graph.actions[decision.action].description
        await self.push_frame(NavigationFrame(nav_ms=nav_ms, state=decision.state,
                                              action=decision.action, intent=intent))
        self._session.log.update_call(final_state=decision.state)

    def _transfer(self, number: str, state: str) -> None:
        self._session.request_transfer(number, why=state)  # dialled after the goodbye plays

    def _end_reason(self) -> CompletionReason:
        return (CompletionReason.TRANSFERRED if self._session.transfer_to
                else CompletionReason.AGENT_HANGUP)

    def _static_from_here(self, error: Exception) -> None:
        logger.exception(f"call {self._session.call_id}: context graph engine failed")
        self._engine.failed = True
        self._session.log.event("context_graph_failed", error=type(error).__name__)

    async def _wait_for_prefetch(self) -> None:
        if self._started is None or self._started.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._started), PREFETCH_WAIT_S)
        except TimeoutError:
            self._session.log.event("prefetch_slow", waited_ms=int(PREFETCH_WAIT_S * 1000))


# Fewer digits than this said are no phone number ("the best one").
MIN_DIGITS = 3


def yes_or_no_without_a_number(said: str) -> bool:
    """A yes or no to a question that offers the number on record ("is the number you're
    calling from the best one?"): no number was said (a lone "one" is not one), so none
    is heard again."""
    return classify_answer(said) is not Answer.UNCLEAR and len(digits_in(said)) < MIN_DIGITS
