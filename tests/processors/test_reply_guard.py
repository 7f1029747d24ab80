"""Never answer stale input, never drop the newest: the three supersede stages."""

import asyncio

from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMContextFrame,
    LLMContextUserTurnFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import SessionMode
from processors.conversation.agent_gate_processor import AgentGateProcessor
from processors.conversation.quick_observer_processor import QuickObserverProcessor
from processors.conversation.reply_guard_processor import ReplyGuardProcessor
from processors.voice.line_speaker_processor import reply_frames
from tests.fakes import make_session


def said(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="")


def turn(text: str) -> list[Frame]:
    """What the user aggregator pushes when a caller turn ends."""
    return [LLMContextUserTurnFrame(text=text, timestamp=""),
            LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))]


class SlowLLM(FrameProcessor):
    """An LLM double: answers each caller turn after `delay_s`, can be interrupted."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self._delay_s = delay_s
        self.started = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            self.started += 1
            text = frame.context.get_messages()[-1]["content"]
            await self.push_frame(LLMFullResponseStartFrame())
            await asyncio.sleep(self._delay_s)
            await self.push_frame(LLMTextFrame(f"About {text}: noted."))
            await self.push_frame(LLMFullResponseEndFrame())
            return
        await self.push_frame(frame, direction)


def spoken(frames) -> list[str]:
    return [f.text for f in frames if isinstance(f, LLMTextFrame)]


async def test_stage_1_a_turn_overtaken_by_newer_words_is_not_answered(writer):
    session = make_session(writer, SessionMode.TEXT)
    llm = SlowLLM(0.0)
    down, _ = await run_test(
        Pipeline([QuickObserverProcessor(session), AgentGateProcessor(session), llm, ReplyGuardProcessor(session)]),
        # The turn ends; newer words are finalized before its context reaches the agent.
        frames_to_send=[said("Tuesday"), SleepFrame(sleep=0.05),
                        LLMContextUserTurnFrame(text="Tuesday", timestamp=""),
                        SleepFrame(sleep=0.05), said("no, Wednesday"), SleepFrame(sleep=0.05),
                        turn("Tuesday")[1], SleepFrame(sleep=0.05),
                        *turn("Tuesday no, Wednesday"), SleepFrame(sleep=0.1)],
    )
    assert llm.started == 1
    assert spoken(down) == ["About Tuesday no, Wednesday: noted."]
    (event,) = writer.events("superseded_reply")
    assert event.data == {"stage": "pre_generation", "newer_turns": 1}


async def test_stage_3_a_reply_made_stale_while_generating_is_not_played(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        Pipeline([QuickObserverProcessor(session), AgentGateProcessor(session), SlowLLM(0.3), ReplyGuardProcessor(session)]),
        frames_to_send=[said("Tuesday"), SleepFrame(sleep=0.05), *turn("Tuesday"),
                        SleepFrame(sleep=0.1), said("sorry, I meant Wednesday"),
                        SleepFrame(sleep=0.4)],
    )
    assert spoken(down) == []
    assert writer.events("superseded_reply")[0].data == {"stage": "pre_playback",
                                                         "newer_turns": 1}


async def test_the_newest_turn_is_always_answered(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        Pipeline([QuickObserverProcessor(session), AgentGateProcessor(session), SlowLLM(0.1), ReplyGuardProcessor(session)]),
        frames_to_send=[said("Tuesday"), SleepFrame(sleep=0.05), *turn("Tuesday"),
                        SleepFrame(sleep=0.3), said("and at nine please"),
                        SleepFrame(sleep=0.05), *turn("and at nine please"),
                        SleepFrame(sleep=0.3)],
    )
    assert spoken(down) == ["About Tuesday: noted.", "About and at nine please: noted."]
    assert writer.events("superseded_reply") == []


async def test_stage_2_a_generation_interrupted_before_playing_is_recorded(writer):
    session = make_session(writer, SessionMode.TEXT)
    await run_test(ReplyGuardProcessor(session), frames_to_send=[
        LLMFullResponseStartFrame(), SleepFrame(sleep=0.05), InterruptionFrame(),
        SleepFrame(sleep=0.05)])
    assert writer.events("superseded_reply")[0].data == {"stage": "generation"}


async def test_the_agents_own_lines_are_never_stale(writer):
    session = make_session(writer, SessionMode.TEXT)
    session.conversation.final_transcripts = 3  # words came in after the last answer
    down, _ = await run_test(ReplyGuardProcessor(session), frames_to_send=reply_frames(
        "I'm bringing in a person from our team.", own_line=True))
    assert spoken(down) == ["I'm bringing in a person from our team."]


async def test_each_reply_the_agent_begins_is_counted(writer):
    session = make_session(writer, SessionMode.TEXT)
    await run_test(ReplyGuardProcessor(session), frames_to_send=[
        *reply_frames("Which day suits you?"), *reply_frames("Still there?", own_line=True)])
    assert session.conversation.agent_replies == 2


class BackchannelReader(FrameProcessor):
    """What the barge-in strategy does with "mm-hm" under the agent's voice."""

    def __init__(self, session) -> None:
        super().__init__()
        self._session = session

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and frame.text == "mm-hm":
            self._session.conversation.not_a_turn()
            return
        await self.push_frame(frame, direction)


async def test_a_backchannel_does_not_make_the_coming_reply_stale(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        Pipeline([QuickObserverProcessor(session), BackchannelReader(session), AgentGateProcessor(session),
                  SlowLLM(0.3), ReplyGuardProcessor(session)]),
        frames_to_send=[said("Tuesday"), SleepFrame(sleep=0.05), *turn("Tuesday"),
                        SleepFrame(sleep=0.1), said("mm-hm"), SleepFrame(sleep=0.4)],
    )
    assert spoken(down) == ["About Tuesday: noted."]
    assert writer.events("superseded_reply") == []
