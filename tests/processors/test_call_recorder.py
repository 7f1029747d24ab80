"""The recorder turns frames into caller and agent turns with their timings."""

from dataclasses import dataclass

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.utils.text.base_text_aggregator import TextType

from call.call_session import SessionMode
from observers.call_record_observer import CallRecordObserver
from tests.fakes import make_session


@dataclass
class Clock:
    ms: int = 0


async def feed(recorder: CallRecordObserver, clock: Clock, at_ms: int, frame) -> None:
    clock.ms = at_ms
    await recorder.on_push_frame(
        FramePushed(source=None, destination=None, frame=frame,
                    direction=FrameDirection.DOWNSTREAM, timestamp=at_ms * 1_000_000)
    )


async def one_exchange(recorder: CallRecordObserver, words: list[str]) -> None:
    clock = Clock()
    await feed(recorder, clock, 0, StartFrame())
    await feed(recorder, clock, 1000, VADUserStartedSpeakingFrame())
    await feed(recorder, clock, 1000, UserStartedSpeakingFrame())
    await feed(recorder, clock, 2500, VADUserStoppedSpeakingFrame())
    await feed(recorder, clock, 2700, TranscriptionFrame("I need an appointment", "caller", ""))
    await feed(recorder, clock, 2900, UserStoppedSpeakingFrame())
    await feed(recorder, clock, 2950, LLMFullResponseStartFrame())
    await feed(recorder, clock, 3100, LLMTextFrame("Sure"))
    await feed(recorder, clock, 3300, TTSAudioRawFrame(b"\0\0" * 80, 8000, 1))
    await feed(recorder, clock, 3320, BotStartedSpeakingFrame())
    for index, word in enumerate(words):
        await feed(recorder, clock, 3320 + index * 200, TTSTextFrame(word, text_type=TextType.WORD))


async def test_a_caller_turn_and_the_answer_are_recorded_with_their_timing(writer):
    recorder = CallRecordObserver(make_session(writer))
    await one_exchange(recorder, ["Sure,", "what", "day?"])
    await recorder.on_push_frame(FramePushed(None, None, LLMFullResponseEndFrame(), FrameDirection.DOWNSTREAM, 3500 * 1_000_000))
    await recorder.on_push_frame(FramePushed(None, None, BotStoppedSpeakingFrame(), FrameDirection.DOWNSTREAM, 4100 * 1_000_000))

    caller, agent = writer.of_type("TurnRecord")
    assert (caller.speaker_role, caller.text) == ("caller", "I need an appointment")
    assert (caller.user_speech_start_ms, caller.user_speech_end_ms) == (1000, 2500)
    assert (agent.speaker_role, agent.text) == ("agent", "Sure, what day?")
    assert agent.engine_ms == 200  # turn end 2900 -> first text 3100
    assert agent.render_ms == 200  # first text 3100 -> first audio 3300
    assert agent.audio_ttfb_ms == 400  # turn end 2900 -> first audio 3300
    assert (agent.agent_speech_start_ms, agent.agent_speech_end_ms) == (3320, 4100)
    assert agent.interrupted is False


async def test_a_barge_in_closes_the_agent_turn_as_interrupted_with_what_was_spoken(writer):
    recorder = CallRecordObserver(make_session(writer))
    await one_exchange(recorder, ["Sure,", "what"])
    await recorder.on_push_frame(FramePushed(None, None, InterruptionFrame(), FrameDirection.DOWNSTREAM, 3700 * 1_000_000))
    agent = writer.of_type("TurnRecord")[-1]
    assert agent.interrupted and agent.text == "Sure, what" and agent.agent_speech_end_ms == 3700


async def test_in_text_sessions_the_agent_turn_ends_at_the_next_caller_turn(writer):
    recorder = CallRecordObserver(make_session(writer, SessionMode.TEXT))
    clock = Clock()
    await feed(recorder, clock, 0, StartFrame())
    await feed(recorder, clock, 10, TranscriptionFrame("hello", "caller", ""))
    await feed(recorder, clock, 70, UserStoppedSpeakingFrame())
    await feed(recorder, clock, 75, LLMFullResponseStartFrame())
    await feed(recorder, clock, 80, LLMTextFrame("Hi there."))
    await feed(recorder, clock, 81, LLMFullResponseEndFrame())
    await feed(recorder, clock, 90, TTSTextFrame("Hi there.", text_type=TextType.SENTENCE))
    await feed(recorder, clock, 2000, TranscriptionFrame("bye", "caller", ""))
    await feed(recorder, clock, 2060, UserStoppedSpeakingFrame())
    caller, agent, caller_2 = writer.of_type("TurnRecord")
    assert caller.text == "hello" and agent.text == "Hi there." and agent.engine_ms == 10
    assert caller_2.text == "bye"


async def test_an_open_turn_is_written_when_the_call_ends(writer):
    recorder = CallRecordObserver(make_session(writer))
    await one_exchange(recorder, ["Sure,"])
    await recorder.flush()
    agent = writer.of_type("TurnRecord")[-1]
    assert agent.text == "Sure," and agent.interrupted
