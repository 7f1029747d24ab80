"""With no LLM the caller still gets an honest answer and a callback offer, never silence."""

from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMServiceMetadataFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test

from call.frames import EndCallFrame
from processors.call_control.fallback_responder_processor import (
    CallbackDialogue,
    FallbackResponderProcessor,
)
from processors.llm_context import last_user_text
from tests.fakes import FailingLLM, ScriptedLLM


def context_frame(text: str) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]))


def test_first_turn_offers_a_callback_and_keeps_the_call_open():
    dialogue = CallbackDialogue("Riverside Clinic")
    reply, end = dialogue.reply("I need to move my appointment")
    assert "can't help with that right now" in reply and "call you back" in reply
    assert "Riverside Clinic" in reply
    assert end is False


def test_yes_requests_the_callback_and_ends_politely():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    reply, end = dialogue.reply("yes please")
    assert "call you back" in reply and reply.endswith("Goodbye.")
    assert end and dialogue.callback_requested


def test_no_declines_without_requesting_anything():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    reply, end = dialogue.reply("no thanks")
    assert end and not dialogue.callback_requested
    assert "call again later" in reply


def test_an_unclear_answer_is_asked_once_more_then_the_call_ends_without_a_request():
    dialogue = CallbackDialogue("Riverside Clinic")
    dialogue.reply("hello")
    again, end_1 = dialogue.reply("um what was that")
    final, end_2 = dialogue.reply("hmm")
    assert "yes or no" in again and not end_1
    assert end_2 and not dialogue.callback_requested


async def test_without_an_llm_the_responder_answers_the_turn_itself(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=False)
    down, _ = await run_test(
        responder,
        frames_to_send=[context_frame("Can I book a checkup?")],
        expected_down_frames=[LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame],
    )
    assert "call you back" in down[1].text
    assert [e.type for e in writer.events()] == ["llm_unavailable"]


async def test_a_yes_to_the_offer_records_the_request_and_ends_the_call(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=False)
    down, _ = await run_test(
        responder,
        frames_to_send=[context_frame("hello"), context_frame("yes please")],
        expected_down_frames=[
            LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame,
            LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame, EndCallFrame,
        ],
    )
    assert down[-1].reason == "agent_hangup"
    assert "callback_requested" in [e.type for e in writer.events()]


async def test_with_an_llm_context_passes_through_untouched(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=True)
    await run_test(
        responder,
        frames_to_send=[context_frame("hello")],
        expected_down_frames=[LLMContextFrame],
    )
    assert writer.events() == []


async def test_an_llm_error_hands_the_turn_to_the_fallback(session, writer):
    responder = FallbackResponderProcessor(session, llm_available=True)
    pipeline = Pipeline([responder, FailingLLM()])
    down, up = await run_test(
        pipeline,
        frames_to_send=[context_frame("hello")],
        expected_down_frames=[
            LLMServiceMetadataFrame, LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame,
        ],
        expected_up_frames=[LLMServiceMetadataFrame, ErrorFrame],
    )
    assert "call you back" in down[2].text
    assert responder.active
    events = writer.events("llm_unavailable")
    assert events and events[0].data["reason"] == "llm error"


class FailingTTSStandIn(FrameProcessor):
    """Something after the LLM (a TTS, the transport) reporting an error upstream."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, LLMFullResponseEndFrame):
            await self.push_error(error_msg="speech synthesis failed")


async def test_an_error_after_a_good_llm_turn_does_not_hand_the_call_to_the_fallback(
    session, writer
):
    responder = FallbackResponderProcessor(session, llm_available=True)
    pipeline = Pipeline([responder, ScriptedLLM(), FailingTTSStandIn()])
    down, up = await run_test(pipeline, frames_to_send=[context_frame("move my appointment")])
    spoken = [f.text for f in down if isinstance(f, LLMTextFrame)]
    assert "".join(spoken) == "You said: move my appointment."
    assert any(isinstance(f, ErrorFrame) for f in up)
    assert not responder.active and writer.events("llm_unavailable") == []


def test_the_callers_words_are_read_past_the_observers_guidance():
    context = LLMContext(messages=[
        {"role": "user", "content": "the earlier one [VOICE: Calmness, valence=0.4]"},
        {"role": "user", "content": "[Director guidance] main/medium/warm | x: y"},
        {"role": "user", "content": "[SAFETY] They may be describing z."},
    ])
    assert last_user_text(LLMContextFrame(context)) == "the earlier one"
