"""The grammar pass re-hears a captured field from the caller's audio, offline."""

import os
import signal
from datetime import date

import pytest

from processors.world.field_grammar import (
    FIELD_KINDS,
    FieldRecognizer,
    confidence,
    date_value,
    dictionary_path,
    field_grammar,
    member_id_value,
    phone_value,
)
from services.espeak.engine import synthesize_script
from services.pocketsphinx.pronunciation import CmuDictionary

pytestmark = pytest.mark.timeout(60)

RATE = 8000
PHONE = "five five five zero one nine nine two one two"
DATE = "march fourteenth nineteen forty eight"
MEMBER_ID = "w four two r one nine five"
UNRELATED = "I would like to book an appointment next Tuesday"


@pytest.fixture(scope="module")
async def speech() -> dict[str, bytes]:
    """Every line the tests hear, spoken once by eSpeak at the phone rate."""
    lines = [PHONE, DATE, MEMBER_ID, UNRELATED]
    audio = await synthesize_script([(line, {}) for line in lines], RATE)
    return dict(zip(lines, audio, strict=True))


@pytest.fixture(scope="module")
async def recognizer():
    recognizer = FieldRecognizer(size=1)
    await recognizer.warm_up()
    yield recognizer
    recognizer.shutdown()


def test_every_grammar_word_has_a_pronunciation_in_the_decoder_dictionary():
    dictionary = CmuDictionary.bundled()
    heads = {line.split()[0].split("(")[0] for line in open(dictionary_path()) if line.strip()}
    for kind in FIELD_KINDS:
        words = field_grammar(kind).words
        assert words and all(w in dictionary for w in words)
        assert words <= heads
    assert "zero" in heads and "fourteenth" in heads and "w" in heads


def test_a_phone_hypothesis_becomes_e164_with_doubles_counted_twice():
    assert phone_value("my number is double five five zero one nine nine two one two") == (
        "+15550199212"
    )
    assert phone_value("five five five zero one nine") is None  # six digits
    assert phone_value("oh one two three four five six seven eight nine") is None  # NANP


def test_a_date_hypothesis_keeps_day_and_year_apart():
    today = date(2026, 1, 15)
    assert date_value("march fourteen nineteen forty eight", today) == "1948-03-14"
    assert date_value("march the twenty first twenty twenty", today) == "2020-03-21"
    assert date_value("my birthday is the third of july two thousand and three", today) == (
        "2003-07-03"
    )
    assert date_value("february thirty first nineteen ninety", today) is None


def test_a_member_id_hypothesis_drops_its_lead_in():
    assert member_id_value("my member id is w four two r one nine five") == "W42R195"
    assert member_id_value("it's a b c d e") is None  # no digit


def test_confidence_follows_the_fit_and_is_capped_when_nothing_parses():
    assert confidence(None, True) == 1
    assert confidence(-30.0, True) == 9 and confidence(-80.0, True) == 1
    assert confidence(-40.0, True) > confidence(-50.0, True)
    assert confidence(-30.0, False) == 3


async def test_a_phone_number_is_read_back_from_speech(recognizer, speech):
    reading = await recognizer.recognize(speech[PHONE], RATE, "phone", timeout_s=20)
    assert reading is not None
    assert reading.value == "+15550199212"
    assert reading.score >= 5


async def test_a_date_of_birth_is_read_back_from_speech(recognizer, speech):
    reading = await recognizer.recognize(speech[DATE], RATE, "date", timeout_s=20)
    assert reading is not None
    assert reading.value == "1948-03-14"
    assert reading.score >= 5


async def test_a_member_id_spelled_out_is_read_back_from_speech(recognizer, speech):
    reading = await recognizer.recognize(speech[MEMBER_ID], RATE, "member_id", timeout_s=20)
    assert reading is not None
    assert reading.value == "W42R195"


async def test_unrelated_speech_yields_no_value_or_a_low_score(recognizer, speech):
    for kind in FIELD_KINDS:
        reading = await recognizer.recognize(speech[UNRELATED], RATE, kind, timeout_s=20)
        assert reading is not None
        assert reading.value is None or reading.score <= 3, (kind, reading.score)


async def test_a_reading_that_takes_too_long_is_given_up(recognizer, speech):
    assert await recognizer.recognize(speech[PHONE], RATE, "phone", timeout_s=0.001) is None


async def test_a_dead_worker_gives_none_and_the_next_request_starts_afresh(speech):
    recognizer = FieldRecognizer(size=1)
    try:
        await recognizer.warm_up()
        for pid in list(recognizer._pool.start()._processes):
            os.kill(pid, signal.SIGKILL)
        assert await recognizer.recognize(speech[DATE], RATE, "date", timeout_s=20) is None
        reading = await recognizer.recognize(speech[DATE], RATE, "date", timeout_s=20)
        assert reading is not None and reading.value == "1948-03-14"
    finally:
        recognizer.shutdown()
