"""Only words interrupt the agent: coughs and short sounds under its voice do not; a short
answer said over it is kept and answered once it has finished."""

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMContextFrame,
    SystemFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from call.call_session import CompletionReason
from tests.fakes import make_session
from turns.barge_in import BargeInRule
from turns.deferred_turns import DeferredTurns
from turns.semantic_barge_in_user_turn_start_strategy import SemanticBargeInUserTurnStartStrategy


def aggregator(session):
    params = LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(
        start=[SemanticBargeInUserTurnStartStrategy(session, poll_s=0.01)],
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


# --- Short answers said over the agent: kept, answered once it has finished -------------


class NewReply(SystemFrame):
    """The agent begins another reply (what the reply guard counts)."""


class ReplyCounter(FrameProcessor):
    def __init__(self, session) -> None:
        super().__init__()
        self._session = session

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, NewReply):
            self._session.conversation.agent_replies += 1
            return
        await self.push_frame(frame, direction)


def keeping(session, **deferred):
    params = LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(
        start=[SemanticBargeInUserTurnStartStrategy(
            session, poll_s=0.01, deferred=DeferredTurns(**{"settle_s": 0.05, **deferred}))],
        stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.2)],
    ))
    user = LLMContextAggregatorPair(LLMContext(), user_params=params).user()
    return Pipeline([ReplyCounter(session), user])


def over_the_agent(text: str, speech_s: float = 0.2) -> list:
    """The caller says something short while the agent is talking."""
    return [VADUserStartedSpeakingFrame(), SleepFrame(sleep=speech_s),
            VADUserStoppedSpeakingFrame(), said(text), SleepFrame(sleep=0.1)]


def caller_messages(down) -> list[str]:
    contexts = [f for f in down if isinstance(f, LLMContextFrame)]
    if not contexts:
        return []
    return [m["content"] for m in contexts[-1].context.get_messages() if m["role"] == "user"]


def deferrals(writer) -> list[tuple]:
    return [(e.data["action"], e.data.get("why")) for e in writer.events("deferred_turn")]


@pytest.mark.parametrize("answer", ["Yes.", "Tuesday", "the second one", "Mm, no.",
                                    "Thursday afternoon", "yep, that one"])
async def test_a_short_answer_over_the_agent_is_answered_once_it_has_finished(writer, answer):
    session = make_session(writer)
    down, up = await run_test(keeping(session), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent(answer), SleepFrame(sleep=0.2),
        BotStoppedSpeakingFrame(), SleepFrame(sleep=0.5)])
    assert caller_messages(down) == [answer]
    assert not interrupted(down, up)  # it never cut the agent off
    assert deferrals(writer) == [("deferred", None), ("answered", None)]
    assert writer.events("deferred_turn")[0].data["words"] == len(answer.split())


@pytest.mark.parametrize("noise", ["Mm-hmm.", "okay", "Right, right.", "uh huh", "Oh okay.",
                                   "I see", "mhm", "yeah"])
async def test_backchannels_over_the_agent_never_become_turns(writer, noise):
    session = make_session(writer)
    session.conversation.final_transcripts = 3  # the quick observer counted this one
    down, up = await run_test(keeping(session), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent(noise), BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.5)])
    assert caller_messages(down) == [] and not interrupted(down, up)
    assert writer.events("deferred_turn") == []
    assert session.conversation.final_transcripts == 2  # no reply is stale because of it


async def test_a_long_run_of_backchannels_does_not_take_the_floor(writer):
    session = make_session(writer)
    down, up = await run_test(keeping(session), frames_to_send=[
        BotStartedSpeakingFrame(), VADUserStartedSpeakingFrame(),
        InterimTranscriptionFrame(text="yeah yeah", user_id="caller", timestamp=""),
        SleepFrame(sleep=0.7), said("yeah, yeah, okay, right"), SleepFrame(sleep=0.6),
        VADUserStoppedSpeakingFrame(), SleepFrame(sleep=0.1)])
    assert not interrupted(down, up) and writer.events("barge_in") == []
    assert caller_messages(down) == []


async def test_what_the_caller_says_next_joins_the_kept_answer(writer):
    session = make_session(writer)
    down, _ = await run_test(keeping(session, settle_s=0.4), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("Tuesday"), BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.1), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.3),
        said("in the afternoon if possible"), VADUserStoppedSpeakingFrame(),
        SleepFrame(sleep=0.5)])
    assert caller_messages(down) == ["Tuesday in the afternoon if possible"]
    assert deferrals(writer) == [("deferred", None), ("coalesced", None)]


@pytest.mark.parametrize("correction", ["no, Wednesday", "Actually make it the Friday",
                                        "sorry, I meant the first one"])
async def test_next_words_that_take_it_back_replace_the_kept_answer(writer, correction):
    session = make_session(writer)
    down, _ = await run_test(keeping(session, settle_s=0.4), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("Tuesday"), BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.1), VADUserStartedSpeakingFrame(), SleepFrame(sleep=0.3),
        said(correction), VADUserStoppedSpeakingFrame(), SleepFrame(sleep=0.5)])
    assert caller_messages(down) == [correction]
    assert deferrals(writer) == [("deferred", None), ("expired", "superseded")]


async def test_a_barge_in_after_a_kept_answer_carries_it_in_front(writer):
    session = make_session(writer)
    down, up = await run_test(keeping(session), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("yes"), VADUserStartedSpeakingFrame(),
        SleepFrame(sleep=0.6), said("and can you check the parking too"),
        SleepFrame(sleep=0.1), VADUserStoppedSpeakingFrame(), SleepFrame(sleep=0.5)])
    assert interrupted(down, up)
    assert caller_messages(down) == ["yes and can you check the parking too"]
    assert deferrals(writer) == [("deferred", None), ("coalesced", None)]


async def test_an_answer_kept_too_long_expires(writer):
    session = make_session(writer)
    down, _ = await run_test(keeping(session, max_age_s=0.2), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("the second one"), SleepFrame(sleep=0.4),
        BotStoppedSpeakingFrame(), SleepFrame(sleep=0.4)])
    assert caller_messages(down) == []
    assert deferrals(writer) == [("deferred", None), ("expired", "too_old")]


async def test_an_answer_kept_over_an_earlier_question_expires_when_the_agent_moves_on(writer):
    session = make_session(writer)
    down, _ = await run_test(keeping(session, settle_s=0.3), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("Monday"), BotStoppedSpeakingFrame(),
        NewReply(), BotStartedSpeakingFrame(), SleepFrame(sleep=0.4),
        BotStoppedSpeakingFrame(), SleepFrame(sleep=0.4)])
    assert caller_messages(down) == []
    assert deferrals(writer) == [("deferred", None), ("expired", "agent_moved_on")]


async def test_the_same_reply_going_on_after_a_pause_keeps_the_answer(writer):
    session = make_session(writer)
    down, _ = await run_test(keeping(session, settle_s=0.3), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("yes please"), BotStoppedSpeakingFrame(),
        BotStartedSpeakingFrame(), SleepFrame(sleep=0.2), BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.6)])
    assert caller_messages(down) == ["yes please"]


@pytest.mark.parametrize(("state", "why"), [("ending", "call_ending"), ("held", "held")])
async def test_nothing_is_kept_for_a_call_that_is_ending_or_held(writer, state, why):
    session = make_session(writer)
    if state == "ending":
        session.completion_reason = CompletionReason.AGENT_HANGUP
    else:
        session.conversation.suspended = True
    down, _ = await run_test(keeping(session), frames_to_send=[
        BotStartedSpeakingFrame(), *over_the_agent("no"), BotStoppedSpeakingFrame(),
        SleepFrame(sleep=0.4)])
    assert caller_messages(down) == []
    assert deferrals(writer) == [("expired", why)]
