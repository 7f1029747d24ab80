"""A caller's turn is never left in silence: one retry, then a fallback line."""

from dataclasses import dataclass

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    ControlFrame,
    Frame,
    FunctionCallFromLLM,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    LLMContextUserTurnFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from call.call_session import SessionMode
from flows.graph_navigator_processor import GraphNavigatorProcessor
from processors.call_control.reply_watch import ReplyWatch
from processors.call_control.reply_watchdog_processor import ReplyWatchdogProcessor
from processors.conversation.guidance_stripper_processor import GuidanceStripperProcessor
from tests.fakes import ScriptedLLM, make_session
from tests.processors.test_graph_navigator import ScriptedEngine, caller_says
from tests.processors.test_graph_navigator import reply as engine_reply

BOUND_S = 4.0
FALLBACK = "I'm sorry, I didn't manage to answer that just now."


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Advance(ControlFrame):
    """Moves the test's clock on when it reaches the clock's hand."""

    seconds: float = 0.0


class ClockHand(FrameProcessor):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, Advance):
            self._clock.now += frame.seconds
            return
        await self.push_frame(frame, direction)


def later(seconds: float) -> list[Frame]:
    return [Advance(seconds=seconds), SleepFrame(sleep=0.05)]


def caller_turn(text: str = "I need to move my appointment") -> Frame:
    return LLMContextUserTurnFrame(text=text, timestamp="")


def reply(*chunks: str) -> list[Frame]:
    return [LLMFullResponseStartFrame(), *(LLMTextFrame(c) for c in chunks),
            LLMFullResponseEndFrame()]


async def watch(writer, frames, *, mode=SessionMode.PHONE, can_regenerate=False,
                suspended=False):
    session = make_session(writer, mode)
    clock = FakeClock()
    session.conversation.clock = clock
    session.conversation.suspended = suspended
    watchdog = ReplyWatchdogProcessor(session, bound_s=BOUND_S, can_regenerate=can_regenerate,
                                   poll_s=0.01)
    # The clock's hand comes after the watchdog: it moves once the frames before it
    # have been through the watchdog.
    down, _ = await run_test(Pipeline([watchdog, ClockHand(clock)]),
                             frames_to_send=[*frames, SleepFrame(sleep=0.05)])
    return down


def said(down) -> list[str]:
    return [f.text for f in down if isinstance(f, LLMTextFrame)]


def steps(writer) -> list[tuple]:
    return [(e.data["step"], e.data.get("path")) for e in writer.events("silent_reply")]


async def test_an_answer_that_is_heard_needs_nothing(writer):
    down = await watch(writer, [caller_turn(), *reply("Of course, ", "which day?"),
                                BotStartedSpeakingFrame(), *later(30)])
    assert said(down) == ["Of course, ", "which day?"]
    assert writer.events("silent_reply") == []


async def test_words_that_never_became_audio_are_said_again_then_a_fallback_line(writer):
    down = await watch(writer, [caller_turn(), *reply("Tuesday at ten is free."),
                                *later(3.9), *later(0.2), *later(BOUND_S)])
    lines = said(down)
    assert lines[:2] == ["Tuesday at ten is free.", "Tuesday at ten is free."]
    assert len(lines) == 3 and lines[2].startswith(FALLBACK)
    assert steps(writer) == [("retry", "repeat"), ("fallback", None)]
    assert writer.events("silent_reply")[0].data["waited_s"] == pytest.approx(4.1)


async def test_a_repeated_answer_that_is_heard_ends_the_watch(writer):
    down = await watch(writer, [caller_turn(), *reply("We open at eight."), *later(4.5),
                                BotStartedSpeakingFrame(), *later(10)])
    assert said(down) == ["We open at eight.", "We open at eight."]
    assert steps(writer) == [("retry", "repeat")]


async def test_a_model_reply_with_nothing_to_say_is_asked_for_again(writer):
    down = await watch(writer, [caller_turn(), *reply("   "), *later(4.5),
                                *reply("Sorry, ", "which day suits you?"),
                                BotStartedSpeakingFrame(), *later(10)],
                       can_regenerate=True)
    (again,) = [f for f in down if isinstance(f, LLMMessagesAppendFrame)]
    assert again.run_llm is True
    assert again.messages[0]["content"].startswith("[NO REPLY HEARD]")
    assert steps(writer) == [("retry", "regenerate")]
    assert not any(s.startswith(FALLBACK) for s in said(down))


async def test_offline_an_answer_still_being_prepared_gets_one_more_wait_then_a_line(writer):
    down = await watch(writer, [caller_turn(), *later(4.5), *later(4.5)])
    (line,) = said(down)
    assert line.startswith(FALLBACK)
    assert steps(writer) == [("retry", "wait"), ("fallback", None)]


async def test_an_answer_that_arrives_during_the_extra_wait_is_enough(writer):
    down = await watch(writer, [caller_turn(), *later(4.5), *reply("Here you go."),
                                BotStartedSpeakingFrame(), *later(10)])
    assert said(down) == ["Here you go."]
    assert steps(writer) == [("retry", "wait")]


async def test_the_watch_stands_aside_while_a_tool_runs(writer):
    call = FunctionCallFromLLM(function_name="CheckAvailability", tool_call_id="t1",
                               arguments={}, context=None)
    down = await watch(writer, [
        caller_turn(), SleepFrame(sleep=0.02), FunctionCallsStartedFrame(function_calls=[call]),
        *later(20),
        FunctionCallResultFrame(function_name="CheckAvailability", tool_call_id="t1",
                                arguments={}, result={}),
        *later(3.0), *reply("Thursday at two is open."), BotStartedSpeakingFrame(),
        *later(10)])
    assert said(down) == ["Thursday at two is open."]
    assert writer.events("silent_reply") == []


async def test_a_caller_who_speaks_again_takes_the_floor(writer):
    await watch(writer, [caller_turn(), SleepFrame(sleep=0.02), UserStartedSpeakingFrame(),
                         *later(20)])
    assert writer.events("silent_reply") == []


async def test_a_call_held_for_a_human_owes_no_answer(writer):
    await watch(writer, [caller_turn(), *later(20)], suspended=True)
    assert writer.events("silent_reply") == []


async def test_in_a_text_session_words_sent_are_words_heard(writer):
    await watch(writer, [caller_turn(), *reply("Sure."), *later(20)], mode=SessionMode.TEXT)
    assert writer.events("silent_reply") == []


def test_each_step_happens_once_per_turn():
    watch = ReplyWatch(bound_s=2.0)
    watch.arm(0.0)
    assert [watch.due(t) for t in (1.9, 2.0, 3.9, 4.0, 10.0)] == [
        None, "retry", None, "fallback", None]
    watch.arm(20.0)  # the next caller turn starts afresh
    assert watch.due(22.5) == "retry"


async def test_a_model_that_answers_only_in_notes_is_asked_again_and_heard(writer):
    """The engage LLM's first answer is all notes (nothing to say once they are stripped):
    the watchdog's retry goes to the assistant aggregator, which runs the model again."""
    session = make_session(writer, SessionMode.TEXT)
    answers = iter(["<guidance>be brief</guidance>", "We open at nine on Saturdays."])
    llm = ScriptedLLM(lambda _text: next(answers))
    context = LLMContext()
    user, assistant = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(
            start=[TranscriptionUserTurnStartStrategy()],
            stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.05)])))
    watchdog = ReplyWatchdogProcessor(session, bound_s=0.3, can_regenerate=True, poll_s=0.02)
    await run_test(
        Pipeline([user, llm, GuidanceStripperProcessor(session), watchdog, assistant]),
        frames_to_send=[TranscriptionFrame(text="what time do you open on saturday",
                                           user_id="caller", timestamp=""),
                        SleepFrame(sleep=1.0)])
    assert llm.contexts_seen == 2
    assert steps(writer) == [("retry", "regenerate")]
    said_last = context.get_messages()[-1]
    assert said_last["role"] == "assistant"
    assert "We open at nine on Saturdays." in str(said_last["content"])


async def test_the_offline_engines_line_that_never_plays_is_said_again_then_a_fallback(writer):
    """The offline engine answers the turn; no audio ever comes back (the voice failed):
    its line is said once more, then the fallback line."""
    session = make_session(writer)
    clock = FakeClock()
    session.conversation.clock = clock
    engine = ScriptedEngine(engine_reply("Which day would suit you best?"))
    watchdog = ReplyWatchdogProcessor(session, bound_s=BOUND_S, can_regenerate=False, poll_s=0.01)
    down, _ = await run_test(
        Pipeline([GraphNavigatorProcessor(session, engine), GuidanceStripperProcessor(session), watchdog,
                  ClockHand(clock)]),
        frames_to_send=[caller_turn("I'd like to book a check-up"),
                        caller_says("I'd like to book a check-up"), SleepFrame(sleep=0.05),
                        *later(4.5), *later(4.5)])
    lines = said(down)
    assert lines[:2] == ["Which day would suit you best?", "Which day would suit you best?"]
    assert lines[2].startswith(FALLBACK)
    assert steps(writer) == [("retry", "repeat"), ("fallback", None)]
