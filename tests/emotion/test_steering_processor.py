"""The steering notes how the caller sounded on the turn; the context's one editor writes
it after their words, once."""

from pipecat.frames.frames import LLMContextFrame, LLMUpdateSettingsFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from processors.conversation.caller_notes_processor import CallerNotesProcessor
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.emotion_steering_processor import EmotionSteeringProcessor
from processors.llm_context import CALLER_NOTES
from services.emotion.reading import EmotionReading, Source

SAID = "I have been waiting for weeks"


def angry() -> CallEmotion:
    emotion = CallEmotion()
    for ago in (2.0, 1.0):
        emotion.state.add(EmotionReading(Source.PROSODY, {"Anger": 0.9}, emotion.clock() - ago))
    return emotion


def turn() -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": SAID}]))


async def test_the_steering_leaves_the_context_alone_and_notes_the_voice_on_the_turn(session):
    frame = turn()
    down, _ = await run_test(EmotionSteeringProcessor(session, angry()), frames_to_send=[frame],
                             expected_down_frames=[LLMUpdateSettingsFrame, LLMContextFrame])
    assert frame.context.get_messages() == [{"role": "user", "content": SAID}]
    [note] = down[1].metadata[CALLER_NOTES]
    assert note.startswith("[VOICE: Anger, valence=-0.")


async def test_the_editor_writes_the_note_after_the_callers_words_once(session):
    frame = turn()
    await run_test(Pipeline([EmotionSteeringProcessor(session, angry()), CallerNotesProcessor(),
                             CallerNotesProcessor()]), frames_to_send=[frame])
    [message] = frame.context.get_messages()
    assert message["content"].startswith(f"{SAID} [VOICE: Anger, valence=-0.")
    assert message["content"].count("[VOICE:") == 1


async def test_nothing_heard_yet_means_no_note(session):
    frame = turn()
    await run_test(Pipeline([EmotionSteeringProcessor(session, CallEmotion()),
                             CallerNotesProcessor()]), frames_to_send=[frame])
    assert frame.context.get_messages() == [{"role": "user", "content": SAID}]
