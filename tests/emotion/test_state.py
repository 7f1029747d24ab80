"""The emotional state's maths, checked against hand-computed cases."""

import pytest

from processors.emotion.state import EmotionalState, Trend, coherence_of, recency_mean, trend_of
from services.emotion.dimensions import emotion_table, load_table
from services.emotion.reading import EmotionReading, Source


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def voice(label: str, score: float, at: float) -> EmotionReading:
    return EmotionReading(Source.PROSODY, {label: score}, at)


def test_every_label_either_provider_emits_has_a_sourced_point():
    table = emotion_table()
    assert len(table.dimensions) == 53 and len(table.prosody_labels) == 48
    assert table.language_only == {"Annoyance", "Disapproval", "Enthusiasm", "Gratitude",
                                   "Sarcasm"}
    # Glasgow: anger V 2.53, A 5.64 → ((2.53 - 5) / 4, (5.64 - 1) / 8)
    assert (table.dimensions["Anger"].valence, table.dimensions["Anger"].arousal) == (
        pytest.approx(-0.6175), pytest.approx(0.58))
    # names are matched as Hume's current API spells them
    assert table.label("surprise (positive)") == "Surprise (positive)"
    assert table.burst("uh-huh") == "Uh-huh" and len(table.burst_types) == 67


def test_a_table_missing_a_label_does_not_load(tmp_path):
    import yaml

    from services.emotion.dimensions import DATA_FILE
    data = yaml.safe_load(DATA_FILE.read_text())
    del data["labels"]["Nostalgia"]
    broken = tmp_path / "dims.yaml"
    broken.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="52 labels, expected 53"):
        load_table(broken)


def test_the_window_weighs_the_newest_segment_most_linearly():
    # weights 1, 2, 3: (1*-0.6 + 2*0.0 + 3*0.6) / 6 = 0.2
    assert recency_mean([-0.6, 0.0, 0.6]) == pytest.approx(0.2)
    clock = Clock()
    state = EmotionalState(clock=clock)
    state.add(voice("Anger", 1.0, 90))    # valence -0.6175
    state.add(voice("Calmness", 1.0, 95))  # valence (7.34 - 5) / 4 = 0.585
    snap = state.snapshot()
    assert snap.valence == pytest.approx((1 * -0.6175 + 2 * 0.585) / 3, abs=1e-4)
    assert snap.dominant == "Calmness" and snap.dominant_score == pytest.approx(2 / 3, abs=1e-4)


def test_segments_older_than_thirty_seconds_leave_the_window():
    clock = Clock()
    state = EmotionalState(clock=clock)
    state.add(voice("Joy", 0.9, 60))
    state.add(voice("Anger", 0.9, 95))
    state.add(voice("Anger", 0.8, 99))
    snap = state.snapshot()
    assert snap.segments == 2 and snap.dominant == "Anger"


@pytest.mark.parametrize(("valences", "trend"), [
    ([-0.5, -0.4, 0.0, 0.1], Trend.IMPROVING),       # second half -0.05 vs first -0.45
    ([0.3, 0.2, 0.1, 0.0], Trend.DETERIORATING),      # 0.05 vs 0.25: -0.2
    ([0.3, 0.25, 0.9, 0.3, 0.22], Trend.STABLE),      # middle ignored: 0.26 vs 0.275
    ([0.4], Trend.STABLE),
])
def test_trend_compares_the_halves_of_the_window(valences, trend):
    assert trend_of(valences) is trend


@pytest.mark.parametrize(("voice_v", "words_v", "expected"), [
    (-0.6, -0.5, 0.97),   # same sign, 0.1 apart: 1 - 0.3 * 0.1
    (-0.6, 0.6, 0.12),    # opposite, 1.2 apart: 0.3 * (1 - 0.6)
    (-0.8, 0.9, 0.045),   # further apart: lower
    (0.05, -0.7, 0.8),    # one neutral
    (-0.6, None, 1.0),    # no language results
])
def test_coherence_follows_the_voice_and_words_table(voice_v, words_v, expected):
    assert coherence_of(voice_v, words_v) == pytest.approx(expected)


def test_a_caller_who_says_fine_but_sounds_distressed_may_be_masking():
    clock = Clock()
    state = EmotionalState(clock=clock)
    state.add(voice("Distress", 0.8, 96))
    state.add(voice("Anxiety", 0.7, 98))
    state.add(EmotionReading(Source.LANGUAGE, {"Contentment": 0.7}, 99))
    snap = state.snapshot()
    assert snap.masking and snap.coherence < 0.4
    assert snap.dominant in ("Distress", "Anxiety") and snap.words_dominant == "Contentment"


def test_one_segment_is_not_enough_to_steer_by():
    state = EmotionalState(clock=Clock())
    state.add(voice("Anger", 0.9, 99))
    assert not state.snapshot().steerable
    state.add(voice("Anger", 0.9, 99.5))
    assert state.snapshot().steerable


def test_unknown_names_are_counted_and_never_guessed():
    state = EmotionalState(clock=Clock())
    state.add(EmotionReading(Source.PROSODY, {"dumbfoundedness": 0.9, "anger": 0.3}, 99))
    snap = state.snapshot()
    assert state.unknown_labels == 1 and snap.dominant == "Anger"


def test_behaviour_signals_count_barge_ins_short_replies_and_silences():
    state = EmotionalState(clock=Clock())
    for reply in ("yes", "no", "fine"):
        state.note_reply(reply)
    state.note_silence(4.9)
    state.note_silence(6.0)
    state.note_barge_in()
    signals = state.snapshot().signals
    assert (signals.short_reply_streak, signals.long_silences, signals.barge_ins) == (3, 1, 1)
    state.note_reply("I need to move my appointment to Friday")
    assert state.snapshot().signals.short_reply_streak == 0


def test_bursts_keep_the_strongest_known_type():
    state = EmotionalState(clock=Clock())
    state.add(EmotionReading(Source.BURST, {"laugh": 0.7, "sigh": 0.2, "beatbox": 0.9}, 99))
    assert (state.last_burst.kind, state.last_burst.confidence) == ("Laugh", 0.7)
    assert state.bursts == {"Laugh": 1}


def arousal_only(arousal: float, at: float) -> EmotionReading:
    """What the offline analyzer hears: how activated the voice is, nothing more."""
    return EmotionReading(Source.PROSODY, {}, at, valence_measured=False, arousal=arousal)


def test_offline_the_words_name_the_feeling_and_the_voice_says_how_activated():
    state = EmotionalState(clock=Clock())
    state.add(arousal_only(0.8, 96))
    state.add(arousal_only(0.7, 98))
    assert not state.snapshot().steerable  # an activated voice alone names no emotion

    state.add(EmotionReading(Source.LANGUAGE, {"Annoyance": 0.8}, 99))
    snap = state.snapshot()
    assert snap.steerable and snap.dominant == "Annoyance"
    assert snap.valence == pytest.approx(-0.6325)  # Glasgow annoyance: (2.47 - 5) / 4
    assert snap.arousal == pytest.approx((1 * 0.8 + 2 * 0.7) / 3, abs=1e-4)  # the voice's
    assert snap.voice_valence is None and snap.coherence == 1.0  # no voice valence: no clash


def test_a_voice_provider_that_hears_valence_names_the_feeling_over_the_words():
    state = EmotionalState(clock=Clock())
    state.add(voice("Sadness", 0.8, 97))
    state.add(voice("Sadness", 0.7, 98))
    state.add(EmotionReading(Source.LANGUAGE, {"Contentment": 0.6}, 99))
    snap = state.snapshot()
    assert snap.dominant == "Sadness" and snap.words_dominant == "Contentment"
    assert snap.masking


def test_sentiment_and_toxicity_of_the_words_are_kept_for_the_window():
    clock = Clock()
    state = EmotionalState(clock=clock)
    hostile = dict.fromkeys(("toxic", "severe_toxic", "obscene", "threat", "insult",
                             "identity_hate"), 0.0) | {"insult": 0.8}
    state.add(EmotionReading(Source.LANGUAGE, {"Anger": 0.7}, 90, sentiment=(1.0,) + (0.0,) * 8,
                             toxicity=hostile))
    state.add(EmotionReading(Source.LANGUAGE, {}, 99, sentiment=(0.0,) * 4 + (1.0,) + (0.0,) * 4))
    snap = state.snapshot()
    assert snap.words_sentiment == pytest.approx((1 * 1 + 2 * 5) / 3, abs=1e-3)  # levels 1, 5
    assert snap.toxicity["insult"] == 0.8
    clock.now = 125  # the hostile words are older than 30 s now
    assert state.snapshot().toxicity == {}
    assert state.toxicity_peaks["insult"] == 0.8  # but the call's summary keeps the peak
