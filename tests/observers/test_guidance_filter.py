"""Guidance never reaches the caller's ear, however the LLM's text is cut into chunks; and
what is not guidance is spoken, brackets included."""

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from processors.conversation.guidance_filter import (
    DATA_FILE,
    DirectiveTags,
    GuidanceFilter,
    TagFile,
    directive_tags,
    is_guidance_message,
    strip_guidance,
)
from processors.conversation.quick_rules import quick_rules

ROOT = Path(__file__).resolve().parents[2]


def streamed(chunks: list[str]) -> str:
    spoken = GuidanceFilter()
    return "".join(spoken.feed(chunk) for chunk in chunks) + spoken.flush()


def every_split(text: str, size: int) -> list[list[str]]:
    return [[text[:offset]] + [text[i:i + size] for i in range(offset, len(text), size)]
            for offset in range(size)]


@pytest.mark.parametrize(("text", "spoken"), [
    ("Sure. [HEALTH] I can help with that.", "Sure. I can help with that."),
    ("<guidance>be warm</guidance>Hello there.", "Hello there."),
    ("[VOICE: Anger, valence=-0.62] I understand.", "I understand."),
    ("Hello <GUIDANCE>shout</Guidance>again.", "Hello again."),
    ("Okay.<guidance>never closed, never spoken", "Okay."),
    ("I can book you in. [EMOTION", "I can book you in."),
    ("[safety] Let's get you seen today.", "Let's get you seen today."),
    ("[INTERRUPTED] Sorry, go on.", "Sorry, go on."),
])
def test_guidance_is_taken_out(text, spoken):
    assert strip_guidance(text) == spoken


@pytest.mark.parametrize(("text", "spoken"), [
    ("Of course.</guidance> Tuesday at ten works.", "Of course. Tuesday at ten works."),
    ("</GUIDANCE>Right, let me look.", "Right, let me look."),
    ("All booked. </guidance", "All booked."),
    ("All booked. <guid", "All booked."),
])
def test_a_closing_tag_with_nothing_open_is_never_spoken(text, spoken):
    assert strip_guidance(text) == spoken


@pytest.mark.parametrize(("text", "spoken"), [
    ("<guidance>outer <guidance>inner</guidance> still outer</guidance>Hi.", "Hi."),
    ("A<guidance>1<guidance>2<guidance>3</guidance></guidance></guidance> B", "A B"),
    ("<guidance>a<guidance>b<guidance>c</guidance>d</guidance>e</guidance>Hi.", "Hi."),
    ("Pick [<guidance>x</guidance>2].", "Pick [2]."),
    ("1 <<guidance>x</guidance> 2", "1 < 2"),
    ("<guidance>x [HEALTH] <guidance>y</guidance> z</guidance>Done.", "Done."),
])
def test_nested_guidance_does_not_leak(text, spoken):
    assert strip_guidance(text) == spoken


@pytest.mark.parametrize(("text", "spoken"), [
    ("[Director guidance] closing/medium/warm | CLOSING: Say a warm goodbye.\nTake care now.",
     "Take care now."),
    ("winding_down/high/gentle | WINDING DOWN: Summarize.\nSo that's Friday at two.",
     "So that's Friday at two."),
    ("Okay.\nmain/low/empathetic | comfort: be kind | (sad)\nI'm sorry to hear that.",
     "Okay.\nI'm sorry to hear that."),
    ("[director GUIDANCE] main/medium/warm | REMIND: bring your card", ""),
    ("[Director guidance] main/high/cheerful | x\nYes.\nSee you then.", "Yes.\nSee you then."),
])
def test_the_directors_line_echoed_by_the_model_is_not_spoken(text, spoken):
    assert strip_guidance(text) == spoken


@pytest.mark.parametrize("text", [
    "Press [2] to hear the options again.",
    "It says [sic] on the letter.",
    "Say [Tuesday] or [Wednesday].",
    "Press [Enter] to continue.",
    "[NOTE] is written on the form.",
    "That's 3 < 5 and 7 > 2.",
    "Press the [ key.",
    "[VOICE: soft\nThat's all.",
    "It costs less than <5 minutes.",
    "main street is closed, so use the car park on the left.",
    "Closing time is six.",
    "[Tuesday at nine would suit you, and we can also look at the afternoon if that is "
    "easier for you, because the clinic is open late on Tuesdays and Thursdays this month",
])
def test_brackets_that_are_not_directives_are_spoken(text):
    assert strip_guidance(text) == text


TEXT = ("Sure thing. <guidance>Stay <guidance>calm</guidance>.</guidance> I found "
        "[HEALTH] two times [sic]: Tuesday at nine, or [2] Wednesday.</guidance>\n"
        "[Director guidance] main/medium/warm | x\nmain/low/gentle | y\nShall I book one?")
EXPECTED = ("Sure thing. I found two times [sic]: Tuesday at nine, or [2] Wednesday.\n"
            "Shall I book one?")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_tag_split_over_any_number_of_chunks_is_still_taken_out(size):
    assert strip_guidance(TEXT) == EXPECTED
    for chunks in every_split(TEXT, size):
        assert streamed(chunks) == EXPECTED


def test_speech_is_passed_on_at_once_and_only_a_possible_tag_waits():
    spoken = GuidanceFilter()
    assert spoken.feed("Hello there, ") == "Hello there, "
    assert spoken.feed("I'll check <gui") == "I'll check "
    assert spoken.feed("dance>x</guidance> now, press [") == "now, press "
    assert spoken.feed("1] for yes") == "[1] for yes"
    assert spoken.feed(" or [HEA") == " or "
    assert spoken.feed("LTH] no.") == "no."
    assert spoken.removed_count == 2


def test_text_with_nothing_to_take_out_passes_exactly_as_it_came():
    assert streamed([" Sure", " thing,", " see you", " then."]) == " Sure thing, see you then."


def test_a_labelled_tag_is_at_most_120_characters_long():
    within = "[VOICE: " + "x" * 113 + "]"  # 120 characters between the brackets
    beyond = "[VOICE: " + "x" * 114 + "]"
    assert strip_guidance(f"{within} Hello.") == "Hello."
    assert strip_guidance(f"{beyond} Hello.") == f"{beyond} Hello."
    spoken = GuidanceFilter()
    assert spoken.feed(within[:-1]) == ""  # may still close within the limit
    assert spoken.feed("x") == beyond[:-1]  # can no longer: it was speech


def test_a_one_word_reply_that_could_start_a_headline_is_spoken_when_the_reply_ends():
    spoken = GuidanceFilter()
    assert spoken.feed("Opening") == ""
    assert spoken.flush() == "Opening"


def test_after_a_reply_ends_the_filter_is_ready_for_the_next():
    spoken = GuidanceFilter()
    assert spoken.feed("Fine.<guidance>never closed") + spoken.flush() == "Fine."
    assert spoken.feed("[Director guidance] main/low/warm | x") + spoken.flush() == ""
    assert spoken.feed("Next reply.") + spoken.flush() == "Next reply."
    assert spoken.removed_count == 2


def test_a_bracket_that_cannot_become_a_tag_is_not_held_back():
    spoken = GuidanceFilter()
    assert spoken.feed("Option [b") == "Option [b"
    assert spoken.feed("] is fine") == "] is fine"
    assert spoken.feed(", or [S") == ", or "  # SAFETY? wait and see
    assert spoken.feed("unday]") == "[Sunday]"


def test_a_reply_that_starts_like_a_headline_waits_only_until_it_is_not_one():
    spoken = GuidanceFilter()
    assert spoken.feed("mai") == ""
    assert spoken.feed("n thing: Tuesday.") == "main thing: Tuesday."
    assert spoken.flush() == ""


def test_a_reply_that_is_only_guidance_says_nothing_and_counts_what_was_removed():
    spoken = GuidanceFilter()
    assert spoken.feed("[HEALTH]<guidance>x</guidance></guidance>") == ""
    assert spoken.flush() == "" and spoken.removed_count == 3


def test_guidance_messages_in_the_context_are_told_from_the_callers_words():
    assert is_guidance_message("[HEALTH] They mentioned pain.")
    assert is_guidance_message("  [Director guidance] main/medium/warm | x")
    assert is_guidance_message("[VOICE: Calm, valence=0.1]")
    assert not is_guidance_message("[1] is my answer")
    assert not is_guidance_message("I said [HEALTH] earlier")
    assert not is_guidance_message("[HEALTH")


def _tags_the_layers_write() -> set[str]:
    """Every `[TAG]` or `[LABEL:` the layers put into the LLM's context."""
    tags = {category.tag for category in quick_rules().spec.categories.values()}
    sources = [*ROOT.glob("prompts/**/*.txt"), *ROOT.glob("processors/**/*.py"),
               *ROOT.glob("flows/*.py")]
    for path in sources:
        tags |= set(re.findall(r"^\[([A-Z][A-Z_]+)(?:\]|:)", path.read_text(), re.M))
        tags |= set(re.findall(r"[\"']\[([A-Z][A-Z_]+|Director guidance)(?:\]|:)",
                               path.read_text()))
    return tags


def test_every_tag_the_layers_write_is_a_known_directive():
    tags = _tags_the_layers_write()
    assert {"HEALTH", "SAFETY", "VOICE", "VERIFY", "INTERRUPTED"} <= tags
    known = directive_tags()
    for tag in tags:
        assert known.kind(tag) is not None or known.kind(f"{tag}: x") is not None, tag


def _tag_file(change) -> dict:
    data = yaml.safe_load(DATA_FILE.read_text())
    change(data)
    return data


@pytest.mark.parametrize(("change", "error"), [
    (lambda d: d["tags"].append("health"), "listed twice"),
    (lambda d: d["labelled"].append("VOICE]"), "letters, spaces and underscores"),
    (lambda d: d["line"].append(" Director"), "letters, spaces and underscores"),
    (lambda d: d.update(tags=[]), "at least 1"),
    (lambda d: d.update(extra=["X"]), "not permitted"),
])
def test_a_tag_file_that_would_misbehave_is_refused(change, error):
    with pytest.raises(ValidationError, match=error):
        TagFile.model_validate(_tag_file(change))


def test_a_tag_added_to_the_file_is_taken_out():
    tags = DirectiveTags(TagFile.model_validate(_tag_file(lambda d: d["tags"].append("RED_FLAG"))))
    spoken = GuidanceFilter(tags)
    assert spoken.feed("[red_flag] Please call now.") + spoken.flush() == "Please call now."
    assert strip_guidance("[RED_FLAG] Please call now.") == "[RED_FLAG] Please call now."
