"""The pre-rendered greeting keeps eSpeak's word times and is recorded with its words,
on the same clock as live TTS words."""

from __future__ import annotations

import asyncio

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.utils.text.base_text_aggregator import TextType

from observers.call_record_observer import CallRecordObserver
from processors.voice.greeting_player_processor import (
    GreetingPlayerProcessor,
    PrerenderedSpeech,
    timed_words,
)
from services.espeak.engine import synthesize_timed
from tests.fakes import make_session

GREETING = "Thank you for calling Riverside Clinic. How can I help you today?"
RATE = 8000


def test_timed_words_cover_the_text_and_only_move_forward():
    text = "Hi — welcome back, 3:30 today"
    # A dash eSpeak does not report, "3:30" reported twice, a time that runs backwards.
    starts = [(0, 0.0), (5, 0.4), (13, 0.8), (19, 1.1), (19, 1.2), (24, 1.05)]
    assert timed_words(text, starts) == (
        ("Hi —", 0.0), ("welcome", 0.4), ("back,", 0.8), ("3:30", 1.1), ("today", 1.1))
    assert timed_words("  Hello there", [(2, 0.1), (8, 0.5)]) == (("Hello", 0.1), ("there", 0.5))
    assert timed_words(text, []) == ()


@pytest.mark.timeout(60)
async def test_the_greeting_render_keeps_its_word_times_within_the_audio():
    rendered = await synthesize_timed(GREETING, RATE)
    speech = PrerenderedSpeech.from_timed(GREETING, rendered)
    assert speech.audio == rendered.audio and speech.sample_rate == RATE
    starts = [start for _, start in speech.words]
    assert " ".join(word for word, _ in speech.words) == GREETING
    assert len(starts) == len(GREETING.split())
    assert all(a < b for a, b in zip(starts, starts[1:])), starts
    assert 0.0 <= starts[0] < 0.3 and starts[-1] < speech.duration_s - 0.1


class PacedOutput(BaseOutputTransport):
    """Plays audio in real time, as a phone line does, so the bot-speaking frames and
    the timed words come when they would on a call."""

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        await asyncio.sleep(len(frame.audio) / 2 / frame.sample_rate)
        return True


@pytest.mark.timeout(60)
async def test_the_greeting_turn_is_written_with_its_words_where_they_are_played(writer):
    speech = PrerenderedSpeech.from_timed(GREETING, await synthesize_timed(GREETING, RATE))
    session = make_session(writer)
    recorder = CallRecordObserver(session)
    output = PacedOutput(TransportParams(audio_out_enabled=True, audio_out_sample_rate=RATE))
    down, _ = await run_test(
        Pipeline([GreetingPlayerProcessor(session, speech), output]),
        frames_to_send=[SleepFrame(sleep=speech.duration_s + 1.0)],
        observers=[recorder], pipeline_params=PipelineParams(audio_out_sample_rate=RATE))

    # The words reach the end of the pipeline one by one, as their audio plays.
    spoken = [f for f in down if isinstance(f, TTSTextFrame)]
    assert [f.text for f in spoken] == [word for word, _ in speech.words]
    assert all(f.text_type == TextType.WORD and f.pts for f in spoken)

    [greeting] = writer.of_type("TurnRecord")
    assert greeting.speaker_role == "agent" and greeting.text == GREETING
    words = greeting.words
    assert [w["word"] for w in words] == GREETING.split()
    # No caller audio here: the recording's clock is the turn clock. The first word is
    # where the agent started speaking, the last ends where it stopped.
    assert abs(words[0]["start_ms"] - greeting.agent_speech_start_ms) <= 60, words[0]
    assert words[-1]["end_ms"] == greeting.agent_speech_end_ms
    for word, (_, start_s) in zip(words, speech.words):  # spaced as eSpeak rendered them
        relative = word["start_ms"] - words[0]["start_ms"]
        assert abs(relative - 1000 * (start_s - speech.words[0][1])) <= 2, word


async def test_a_greeting_cut_off_before_it_played_sends_no_words(writer):
    speech = PrerenderedSpeech(GREETING, RATE, bytes(RATE), words=(("Thank", 0.0), ("you", 0.2)))
    down, _ = await run_test(
        GreetingPlayerProcessor(make_session(writer), speech),
        frames_to_send=[InterruptionFrame(), BotStartedSpeakingFrame()])
    assert not [f for f in down if isinstance(f, TTSTextFrame)]
    assert isinstance(down[-1], BotStartedSpeakingFrame)  # a later reply's speech: no words
