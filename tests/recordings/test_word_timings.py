"""Word timings: each provider's times moved onto the call record's clock, per turn."""

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InputAudioRawFrame,
    InterruptionFrame,
    StartFrame,
    TranscriptionFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import FramePushed
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.frame_processor import FrameDirection
from pipecat.tests.utils import run_test
from pipecat.utils.text.base_text_aggregator import TextType

from call.word_timings import SegmentWords, caller_words, deepgram_words, spoken_words
from observers.call_record_observer import CallRecordObserver
from services.espeak.engine import synthesize_pcm
from services.pocketsphinx.stt import PocketSphinxSTTService, TimedWord
from tests.fakes import make_session

MS = 1_000_000
RATE = 8000


async def feed(recorder: CallRecordObserver, at_ms: int, frame) -> None:
    await recorder.on_push_frame(FramePushed(None, None, frame, FrameDirection.DOWNSTREAM,
                                             at_ms * MS))


def word_frame(text: str, pts_ms: int | None) -> TTSTextFrame:
    frame = TTSTextFrame(text, text_type=TextType.WORD)
    frame.pts = None if pts_ms is None else pts_ms * MS
    return frame


def test_segment_words_end_where_voice_activity_stopped():
    segment = SegmentWords((TimedWord("book", 1.0, 1.25), TimedWord("now", 1.3, 1.6)), 2.0)
    assert caller_words(segment, 5000, None) == [
        {"word": "book", "start_ms": 4000, "end_ms": 4250},
        {"word": "now", "start_ms": 4300, "end_ms": 4600},
    ]
    assert caller_words(segment, None, 0) is None  # no VAD stop seen: no invented time


def test_deepgram_words_count_from_the_first_audio_sent():
    result = {"channel": {"alternatives": [{"transcript": "hi there", "words": [
        {"word": "hi", "start": 0.5, "end": 0.7, "punctuated_word": "Hi"},
        {"word": "there", "start": 0.75, "end": 1.1},
    ]}]}}
    assert deepgram_words(result, 40) == [
        {"word": "Hi", "start_ms": 540, "end_ms": 740},
        {"word": "there", "start_ms": 790, "end_ms": 1140},
    ]
    assert deepgram_words({"channel": {"alternatives": [{"words": []}]}}, 40) is None
    assert deepgram_words(result, None) is None
    assert caller_words(None, 1000, 0) is None  # a provider without a result


def test_spoken_words_end_at_the_next_word_and_unplayed_words_are_dropped():
    starts = [("Sure,", 1000), ("what", 1300), ("day?", 1500)]
    assert spoken_words(starts, 2000) == [
        {"word": "Sure,", "start_ms": 1000, "end_ms": 1300},
        {"word": "what", "start_ms": 1300, "end_ms": 1500},
        {"word": "day?", "start_ms": 1500, "end_ms": 2000},
    ]
    assert [w["word"] for w in spoken_words(starts, 1400)] == ["Sure,", "what"]
    assert spoken_words(starts, None) is None and spoken_words([], 2000) is None


async def test_recorder_writes_caller_and_agent_words_on_the_turn_clock(writer):
    recorder = CallRecordObserver(make_session(writer))
    await feed(recorder, 0, StartFrame())
    await feed(recorder, 20, InputAudioRawFrame(b"\0\0" * 160, RATE, 1))
    await feed(recorder, 1000, VADUserStartedSpeakingFrame())
    await feed(recorder, 2500, VADUserStoppedSpeakingFrame())
    segment = SegmentWords((TimedWord("checkup", 0.9, 1.4),), 1.9)
    await feed(recorder, 2700, TranscriptionFrame("checkup", "caller", "", result=segment))
    await feed(recorder, 2900, UserStoppedSpeakingFrame())
    await feed(recorder, 3300, BotStartedSpeakingFrame())
    for text, at in (("Sure,", 3320), ("what", 3600), ("day?", 3800)):
        await feed(recorder, 3300, word_frame(text, at))  # pushed early, pts = when played
    await feed(recorder, 4100, BotStoppedSpeakingFrame())

    caller, agent = writer.of_type("TurnRecord")
    assert caller.words == [{"word": "checkup", "start_ms": 1500, "end_ms": 2000}]
    assert caller.user_speech_start_ms <= caller.words[0]["start_ms"]
    assert agent.words == [
        {"word": "Sure,", "start_ms": 3320, "end_ms": 3600},
        {"word": "what", "start_ms": 3600, "end_ms": 3800},
        {"word": "day?", "start_ms": 3800, "end_ms": 4100},
    ]


async def test_untimed_text_and_barge_in(writer):
    recorder = CallRecordObserver(make_session(writer))
    await feed(recorder, 0, StartFrame())
    # The greeting is one sentence frame without a pts: no word times at all.
    await feed(recorder, 10, BotStartedSpeakingFrame())
    await feed(recorder, 10, TTSTextFrame("Hello, clinic.", text_type=TextType.SENTENCE))
    await feed(recorder, 900, BotStoppedSpeakingFrame())
    # A transcript without times (text input, a provider without words): NULL.
    await feed(recorder, 1000, VADUserStartedSpeakingFrame())
    await feed(recorder, 1500, VADUserStoppedSpeakingFrame())
    await feed(recorder, 1600, TranscriptionFrame("hello", "caller", ""))
    await feed(recorder, 1700, UserStoppedSpeakingFrame())
    # Cut off after two words: the third was never played.
    await feed(recorder, 2000, BotStartedSpeakingFrame())
    for text, at in (("We", 2000), ("have", 2200), ("Tuesday", 2500)):
        await feed(recorder, 2000, word_frame(text, at))
    await feed(recorder, 2400, InterruptionFrame())

    greeting, caller, cut = writer.of_type("TurnRecord")
    assert greeting.words is None and caller.words is None
    assert cut.interrupted and [w["word"] for w in cut.words] == ["We", "have"]
    assert cut.words[-1]["end_ms"] == 2400


@pytest.mark.timeout(60)
async def test_pocketsphinx_gives_each_word_its_time_in_the_segment():
    speech = await synthesize_pcm("I would like to book an appointment", RATE)
    pcm = bytes(RATE * 2) + speech  # one second of silence first
    frames = [VADUserStartedSpeakingFrame()]
    frames += [InputAudioRawFrame(pcm[i:i + 320], RATE, 1) for i in range(0, len(pcm), 320)]
    frames.append(VADUserStoppedSpeakingFrame())

    down, _ = await run_test(PocketSphinxSTTService(keyterms=[]), frames_to_send=frames,
                             pipeline_params=PipelineParams(audio_in_sample_rate=RATE))

    [transcript] = [f for f in down if isinstance(f, TranscriptionFrame)]
    segment = transcript.result
    assert isinstance(segment, SegmentWords)
    assert segment.audio_end_s == pytest.approx(len(pcm) / 2 / RATE, abs=0.001)
    words = segment.words
    assert [w.word for w in words] == transcript.text.split()
    assert words[0].start_s == pytest.approx(1.0, abs=0.12)  # the speech starts at 1 s
    assert words[-1].end_s <= segment.audio_end_s
    assert all(a.start_s < b.start_s and a.start_s < a.end_s for a, b in zip(words, words[1:]))


async def test_words_are_stored_and_shown_in_the_call_detail(db, workspace_id, call_id):
    from db import repositories as repo
    from db.records import TurnRecord, record_from_line, record_to_line, write_records

    words = [{"word": "checkup", "start_ms": 1500, "end_ms": 2000}]
    timed = TurnRecord(call_id, 1, "caller", "caller", "checkup", words=words)
    untimed = TurnRecord(call_id, 2, "agent", "agent", "Hello")
    assert record_from_line(record_to_line(timed)) == timed  # survives the spool
    async with db.pool.acquire() as conn:
        await write_records(conn, [timed, untimed])

    detail = await repo.get_call_detail(db.pool, call_id, workspace_id)
    assert [turn["words"] for turn in detail["turns"]] == [words, None]


async def test_words_move_onto_the_recording_clock_when_caller_audio_was_waiting(writer):
    """200 ms of caller audio arrive at once when the pipeline starts (it waited for it):
    the recording is 200 ms ahead of the turn clock, and so are the words."""
    recorder = CallRecordObserver(make_session(writer))
    await feed(recorder, 0, StartFrame())
    for _ in range(10):  # the backlog: 10 x 20 ms at t = 5 ms
        await feed(recorder, 5, InputAudioRawFrame(b"\0\0" * 160, RATE, 1))
    for tick in range(1, 50):  # then in real time, one a little late
        await feed(recorder, 5 + 20 * tick + (30 if tick == 7 else 0),
                   InputAudioRawFrame(b"\0\0" * 160, RATE, 1))
    await feed(recorder, 1000, VADUserStartedSpeakingFrame())
    await feed(recorder, 1500, VADUserStoppedSpeakingFrame())
    segment = SegmentWords((TimedWord("yes", 0.2, 0.4),), 0.6)
    await feed(recorder, 1600, TranscriptionFrame("yes", "caller", "", result=segment))
    await feed(recorder, 1700, UserStoppedSpeakingFrame())
    await feed(recorder, 2000, BotStartedSpeakingFrame())
    await feed(recorder, 2000, word_frame("Great.", 2000))
    await feed(recorder, 2600, BotStoppedSpeakingFrame())
    await recorder.flush()

    caller, agent = writer.of_type("TurnRecord")
    assert (caller.user_speech_end_ms, agent.agent_speech_start_ms) == (1500, 2000)
    assert caller.words == [{"word": "yes", "start_ms": 1295, "end_ms": 1495}]
    assert agent.words == [{"word": "Great.", "start_ms": 2195, "end_ms": 2795}]
    [clock] = [e for e in writer.of_type("EventRecord") if e.type == "recording_clock"]
    assert clock.data == {"offset_ms": 195}


async def test_deepgram_words_in_the_recorder_count_from_the_recordings_start(writer):
    recorder = CallRecordObserver(make_session(writer))
    await feed(recorder, 0, StartFrame())
    for tick in range(5):  # 100 ms of caller audio, 40 ms already waiting at the start
        await feed(recorder, tick * 20 - 40 if tick > 1 else 0,
                   InputAudioRawFrame(b"\0\0" * 160, RATE, 1))
    await feed(recorder, 1000, VADUserStartedSpeakingFrame())
    await feed(recorder, 1500, VADUserStoppedSpeakingFrame())
    result = {"channel": {"alternatives": [{"transcript": "yes", "words": [
        {"word": "yes", "start": 1.06, "end": 1.3, "punctuated_word": "Yes."}]}]}}
    await feed(recorder, 1600, TranscriptionFrame("Yes.", "caller", "", result=result))
    await feed(recorder, 1700, UserStoppedSpeakingFrame())

    [caller] = writer.of_type("TurnRecord")
    assert caller.words == [{"word": "Yes.", "start_ms": 1060, "end_ms": 1300}]
