"""The offline emotion providers: arousal from the voice signal, emotion from the words."""

import time

import pytest

from services.emotion.reading import EmotionReading, Source
from services.espeak.engine import VoiceShape, synthesize_pcm
from services.prosody.emotion import (
    LocalAudioProvider,
    ProsodyPool,
    may_hold_speech,
    prosody_features,
)
from services.vader.emotion import LocalTextAnalyzer, sentiment_distribution

SENTENCE = "I need to see a doctor about my appointment next week please"
SEGMENT_S = 2.0


async def two_seconds(rate: int, wpm: int, shape: VoiceShape) -> bytes:
    pcm = await synthesize_pcm(SENTENCE, rate, words_per_minute=wpm, shape=shape)
    return pcm[: int(SEGMENT_S * rate) * 2]


@pytest.mark.parametrize("rate", [8000, 16000])
async def test_fast_loud_high_speech_sounds_more_aroused_than_calm_speech(rate):
    calm = await two_seconds(rate, 140, VoiceShape(pitch=40, range=30, volume=70))
    agitated = await two_seconds(rate, 260, VoiceShape(pitch=80, range=90, volume=180))

    calm_f, agitated_f = prosody_features(calm, rate), prosody_features(agitated, rate)

    assert agitated_f.arousal > calm_f.arousal + 0.15
    assert agitated_f.loudness_db > calm_f.loudness_db
    assert agitated_f.pitch_hz > calm_f.pitch_hz
    assert agitated_f.syllables_per_s > calm_f.syllables_per_s


async def test_the_reading_claims_arousal_only_and_silence_gives_none():
    agitated = await two_seconds(16000, 260, VoiceShape(pitch=80, range=90, volume=180))
    provider = LocalAudioProvider(ProsodyPool())  # its own worker process, as in a call
    [reading] = await provider.analyze(agitated, 16000, at=5.0)
    assert reading.source is Source.PROSODY and not reading.valence_measured
    assert reading.arousal > 0.5 and reading.scores == {}  # no emotion or valence claimed
    assert await provider.analyze(b"\x00\x00" * 32000, 16000, at=5.0) == []


async def test_a_two_second_segment_is_analysed_well_within_budget():
    segment = await two_seconds(16000, 180, VoiceShape())
    prosody_features(segment, 16000)  # first call warms numpy's FFT plans
    started = time.perf_counter()
    for _ in range(20):
        prosody_features(segment, 16000)
    assert (time.perf_counter() - started) / 20 < 0.1  # the benchmark holds the real budget


@pytest.mark.parametrize(("words", "label"), [
    ("This is ridiculous, I have been waiting for an hour!", "Annoyance"),
    ("I'm really worried about my test results", "Anxiety"),
    ("Thank you so much, that is a relief", "Gratitude"),
    ("Sorry, what do you mean?", "Confusion"),
    ("Oh great, another hold", "Sarcasm"),
    ("THIS IS A TERRIBLE SERVICE!!", "Distress"),
])
def test_words_that_carry_a_feeling_are_labelled(words, label):
    [reading] = LocalTextAnalyzer().analyze(words, at=1.0)
    assert reading.source is Source.LANGUAGE and label in reading.scores


def test_plain_answers_carry_no_emotion_and_sarcasm_cancels_praise():
    assert LocalTextAnalyzer().analyze("Yes", at=1.0) == []
    assert LocalTextAnalyzer().analyze("Tuesday at ten", at=1.0) == []
    [reading] = LocalTextAnalyzer().analyze("Oh great, another hold", at=1.0)
    assert "Joy" not in reading.scores


def test_written_bursts_become_burst_readings():
    readings = LocalTextAnalyzer().analyze("ugh, not again", at=1.0)
    bursts = [r for r in readings if r.source is Source.BURST]
    assert bursts and "Ugh" in bursts[0].scores


@pytest.mark.parametrize(("words", "category"), [
    ("You people are useless, this stupid clinic", "insult"),
    ("What the hell is going on with my booking", "obscene"),
    ("You'll regret this", "threat"),
])
def test_hostile_words_aimed_at_the_agent_score_their_toxicity(words, category):
    [reading] = LocalTextAnalyzer().analyze(words, at=1.0)
    assert reading.toxicity[category] == 0.8


@pytest.mark.parametrize("words", [
    "I feel stupid asking this", "I have a bloody nose", "My arm is useless since the fall",
])
def test_what_patients_say_of_themselves_is_not_hostile(words):
    assert all(not (r.toxicity and any(r.toxicity.values()))
               for r in LocalTextAnalyzer().analyze(words, at=1.0))


@pytest.mark.parametrize(("compound", "level"), [(-1.0, 1), (0.0, 5), (1.0, 9), (-0.5, 3)])
def test_vader_compound_sits_on_the_nine_level_sentiment_scale(compound, level):
    levels = sentiment_distribution(compound)
    assert len(levels) == 9 and sum(levels) == pytest.approx(1.0)
    reading = EmotionReading(Source.LANGUAGE, {}, 0.0, sentiment=levels)
    assert reading.sentiment_level == pytest.approx(level)


async def test_silence_is_not_sent_to_the_analyzer_and_speech_always_is():
    speech = await two_seconds(8000, 165, VoiceShape())
    quiet = (b"\x10\x00" * 16000)  # a hiss at -70 dBFS
    assert may_hold_speech(speech, 8000) and not may_hold_speech(quiet, 8000)
    assert prosody_features(quiet, 8000) is None  # the analyzer would say nothing either
    assert not may_hold_speech(b"", 8000)
