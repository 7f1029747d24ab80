"""Who callers say they are, however they say it: introductions, spelled names, birth dates."""

from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from language.caller_identity import (
    answered_name,
    closer_to_first,
    corrected_birth_date,
    identity_words,
    introduced_name,
    spelled_words,
    volunteered_birth_date,
    volunteered_phone,
)

TODAY = date(2026, 11, 24)


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Hi, this is Jamie Cole, born July 9th 1972, I need a physio", ["Jamie", "Cole"]),
        ("hello my name's priya nair and I'd like to book", ["Priya", "Nair"]),
        ("Morning, Ruth O'Brien here, ringing about my knee", ["Ruth", "O'Brien"]),
        ("it's Dev Okafor-Nair speaking", ["Dev", "Okafor-Nair"]),
        ("you're speaking to Mabel", ["Mabel"]),
        ("I'm Tomasz Wojcik, new patient", ["Tomasz", "Wojcik"]),
    ],
)
def test_an_introduction_anywhere_in_the_turn_gives_the_name(said, name):
    assert introduced_name(said) == name


@pytest.mark.parametrize(
    "said",
    ["I'm desperate to get in", "it's for my son", "I'm in a lot of pain", "this is about my "
     "booking", "I'm calling to cancel", "I'm seventy two", "it's me again", "I'm not sure"],
)
def test_feelings_and_reasons_after_an_introduction_word_are_not_names(said):
    assert introduced_name(said) == []


def test_an_answer_to_the_name_question_is_its_name_words():
    assert answered_name("um, it's Sam") == ["Sam"]
    assert answered_name("Okafor-Nair.") == ["Okafor-Nair"]
    assert answered_name("yes that's right") == []


@pytest.mark.parametrize(
    ("said", "spelled"),
    [
        ("no, Reid, R-E-I-D", ["Reid"]),
        ("that's r e i d", ["Reid"]),
        ("R. E. I. D.", ["Reid"]),
        ("it's spelt R double E D", ["Reed"]),
        ("J-A-M-I-E C-O-L-E", ["Jamie", "Cole"]),
        ("I have a BMW and a TV", []),
        ("I'm fine", []),
    ],
)
def test_spelled_names(said, spelled):
    assert spelled_words(said) == spelled


def test_a_spelling_replaces_the_word_it_spells_in_an_answer():
    assert answered_name("Jamie Reid, that's R-E-I-D") == ["Jamie", "Reid"]
    assert answered_name("Smyth, S M Y T H") == ["Smyth"]


def test_a_spelled_correction_goes_to_the_name_part_it_is_like():
    assert not closer_to_first("Reid", "Jamie", "Reed")
    assert closer_to_first("Jaime", "Jamie", "Reed")
    assert closer_to_first("Jo", "Jamie", None)


@pytest.mark.parametrize(
    ("said", "asked", "born"),
    [
        ("born on the ninth of July 1972", False, date(1972, 7, 9)),
        ("date of birth seven nine seventy two", False, date(1972, 7, 9)),
        ("my birthday's oh seven, oh nine, seventy-two", False, date(1972, 7, 9)),
        ("seven nine seventy two", True, date(1972, 7, 9)),
        ("seven nine seventy two", False, None),
        ("July 9 1972", False, date(1972, 7, 9)),  # a full date long past: a birth date
        ("my last visit was March 3 2025", False, None),
    ],
)
def test_birth_dates_need_a_cue_unless_asked_for(said, asked, born):
    assert volunteered_birth_date(said, TODAY, asked=asked) == born


def test_a_phone_number_said_with_its_cue():
    assert volunteered_phone("my number is three one two, five five five, zero one nine nine") \
        == "+13125550199"
    assert volunteered_phone("you can reach me on (312) 555-0199") == "+13125550199"
    assert volunteered_phone("I'm seventy two") is None


def test_the_word_lists_are_checked_at_load(tmp_path: Path):
    bad = tmp_path / "words.yaml"
    bad.write_text("name_cues: [my name is]\nnot_names: 'two words, here'\n"
                   "birth_cues: [born]\nspelled_doubles: [double]\n")
    with pytest.raises(ValidationError, match="single lower-case words"):
        identity_words.__wrapped__(bad)


@pytest.mark.parametrize(
    ("said", "corrected"),
    [
        ("the year is nineteen eighty one", date(1981, 4, 11)),
        ("no, the year's eighty one", date(1981, 4, 11)),
        ("it's May, not April", date(1980, 5, 11)),
        ("the twelfth, not the eleventh", date(1980, 4, 12)),
        ("that's wrong", None),
    ],
)
def test_one_part_of_a_birth_date_said_again_corrects_it(said, corrected):
    assert corrected_birth_date(said, date(1980, 4, 11), TODAY) == corrected
