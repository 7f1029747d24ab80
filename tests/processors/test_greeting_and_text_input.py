"""The greeting plays at once from pre-rendered audio; typed lines become transcriptions."""

from pipecat.frames.frames import (
    LLMMessagesAppendFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frameworks.rtvi.frames import RTVISendTextFrame
from pipecat.tests.utils import run_test

from call.call_session import SessionMode
from processors.voice.greeting_player_processor import GreetingPlayerProcessor, PrerenderedSpeech
from processors.voice.text_input_processor import TextInputProcessor
from tests.fakes import make_session, tone

GREETING = "Thank you for calling Riverside Clinic."


async def test_the_prerendered_greeting_is_spoken_as_soon_as_the_call_starts(writer):
    speech = PrerenderedSpeech(GREETING, 8000, tone(0.1, 8000))
    down, _ = await run_test(GreetingPlayerProcessor(make_session(writer), speech), frames_to_send=[])
    assert isinstance(down[0], TTSStartedFrame) and isinstance(down[-1], TTSStoppedFrame)
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert audio == speech.audio
    assert [f.text for f in down if isinstance(f, TTSTextFrame)] == [GREETING]


async def test_text_sessions_get_the_greeting_words_without_audio(writer):
    speech = PrerenderedSpeech(GREETING, 8000, b"")
    down, _ = await run_test(
        GreetingPlayerProcessor(make_session(writer, SessionMode.TEXT), speech), frames_to_send=[],
        expected_down_frames=[TTSStartedFrame, TTSTextFrame, TTSStoppedFrame],
    )


async def test_a_typed_line_becomes_a_transcription_and_the_direct_append_is_dropped():
    frames = [
        LLMMessagesAppendFrame(messages=[{"role": "user", "content": "book me in"}], run_llm=True),
        RTVISendTextFrame(msg_id="1", text="book me in", user_id=None),
    ]
    down, _ = await run_test(TextInputProcessor(), frames_to_send=frames, expected_down_frames=[TranscriptionFrame])
    assert down[0].text == "book me in" and down[0].finalized


async def test_other_context_appends_pass_through_the_bridge():
    guidance = LLMMessagesAppendFrame(messages=[{"role": "developer", "content": "be brief"}], run_llm=False)
    await run_test(TextInputProcessor(), frames_to_send=[guidance], expected_down_frames=[LLMMessagesAppendFrame])
