"""Guidance never reaches the caller's ear, however the LLM's text is cut into chunks."""

import pytest

from services.observers.guidance_filter import GuidanceFilter, strip_guidance


def streamed(chunks: list[str]) -> str:
    spoken = GuidanceFilter()
    return "".join(spoken.feed(chunk) for chunk in chunks) + spoken.flush()


@pytest.mark.parametrize(("text", "spoken"), [
    ("Sure. [HEALTH] I can help with that.", "Sure. I can help with that."),
    ("<guidance>be warm</guidance>Hello there.", "Hello there."),
    ("[VOICE: Anger, valence=-0.62] I understand.", "I understand."),
    ("[Director guidance] main/medium/warm | x\nHello.", "main/medium/warm | x\nHello."),
    ("Hello <GUIDANCE>shout</Guidance>again.", "Hello again."),
    ("Okay.<guidance>never closed, never spoken", "Okay."),
    ("I can book you in. [EMOTION", "I can book you in."),
])
def test_guidance_is_taken_out(text, spoken):
    assert strip_guidance(text) == spoken


@pytest.mark.parametrize("text", [
    "Option [1] is Tuesday [sic].",
    "That's 3 < 5 and 7 > 2.",
    "Press the [ key.",
    "It costs less than <5 minutes.",
    "[Tuesday at nine would suit you, and we can also look at the afternoon if that is "
    "easier for you, because the clinic is open late on Tuesdays and Thursdays this month",
])
def test_legitimate_speech_with_brackets_is_kept(text):
    assert strip_guidance(text) == text


TEXT = ("Sure thing. <guidance>Stay calm.</guidance> I found [HEALTH] two times [sic]: "
        "Tuesday at nine, or Wednesday.")
EXPECTED = "Sure thing. I found two times [sic]: Tuesday at nine, or Wednesday."


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_tag_split_over_any_number_of_chunks_is_still_taken_out(size):
    for offset in range(size):
        chunks = [TEXT[:offset]] + [TEXT[i:i + size] for i in range(offset, len(TEXT), size)]
        assert streamed(chunks) == EXPECTED


def test_speech_is_passed_on_at_once_and_only_a_possible_tag_waits():
    spoken = GuidanceFilter()
    assert spoken.feed("Hello there, ") == "Hello there, "
    assert spoken.feed("I'll check <gui") == "I'll check "
    assert spoken.feed("dance>x</guidance> now.") == "now."
    assert spoken.removed_count == 1
