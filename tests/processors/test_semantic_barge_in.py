"""Only words interrupt the agent: coughs and short sounds under its voice do not."""

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    InterruptionFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from processors.semantic_barge_in import SemanticBargeInStrategy
from services.observers.barge_in import BargeInRule
from tests.fakes import make_session


def aggregator(session):
    params = LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(
        start=[SemanticBargeInStrategy(session, poll_s=0.01)],
        stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.3)],
    ))
    return LLMContextAggregatorPair(LLMContext(), user_params=params).user()


def said(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="")


def interrupted(down, up) -> bool:
    return any(isinstance(f, InterruptionFrame) for f in [*down, *up])


def test_the_rule_needs_words_and_half_a_second_or_a_full_second_of_speech():
    rule = BargeInRule()
    rule.speech_started(0.0)
    assert rule.heard_words(0.3) is None and rule.tick(0.4) is None
    assert rule.tick(0.5) == "words"
    rule.reset()
    rule.speech_started(10.0)
    assert rule.tick(10.9) is None and rule.tick(11.0) == "sustained_speech"
    rule.reset()
    rule.speech_started(20.0)
    rule.speech_stopped(20.3)  # a cough
    assert rule.tick(25.0) is None and rule.heard_words(25.0) is None
    rule.speech_started(30.0)
    rule.speech_stopped(30.7)
    assert rule.heard_words(31.2) == "words"  # words that came after the speech ended


async def test_a_cough_under_the_agents_voice_does_not_interrupt(writer):
    session = make_session(writer)
    down, up = await run_test(aggregator(session), frames_to_send=[
        BotStartedSpeakingFrame(), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.3),
        VADUserStoppedSpeakingFrame(), SleepFrame(sleep=0.3)])
    assert not interrupted(down, up) and writer.events("barge_in") == []


async def test_a_short_mm_hm_does_not_interrupt_either(writer):
    session = make_session(writer)
    down, up = await run_test(aggregator(session), frames_to_send=[
        BotStartedSpeakingFrame(), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.2),
        VADUserStoppedSpeakingFrame(), said("mm hm"), SleepFrame(sleep=0.4)])
    assert not interrupted(down, up)


async def test_words_with_half_a_second_of_speech_take_the_floor(writer):
    session = make_session(writer)
    down, up = await run_test(aggregator(session), frames_to_send=[
        BotStartedSpeakingFrame(), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.6),
        said("wait, stop"), SleepFrame(sleep=0.2)])
    assert interrupted(down, up)
    assert any(isinstance(f, UserStartedSpeakingFrame) for f in down)
    (event,) = writer.events("barge_in")
    assert event.data["how"] == "words" and event.data["speech_s"] >= 0.5
    assert session.conversation.barge_ins == 1


async def test_a_second_of_speech_interrupts_when_the_words_are_late(writer):
    session = make_session(writer)
    down, up = await run_test(aggregator(session), frames_to_send=[
        BotStartedSpeakingFrame(), VADUserStartedSpeakingFrame(), SleepFrame(sleep=1.2)])
    assert interrupted(down, up)
    assert writer.events("barge_in")[0].data["how"] == "sustained_speech"


async def test_while_the_agent_is_silent_voice_activity_starts_the_turn_at_once(writer):
    session = make_session(writer)
    down, up = await run_test(aggregator(session), frames_to_send=[
        VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.1)])
    assert any(isinstance(f, UserStartedSpeakingFrame) for f in down)
    assert writer.events("barge_in") == []
