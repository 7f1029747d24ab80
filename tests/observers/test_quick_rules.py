"""The quick observer's rules: what a caller's words signal, in ~0 ms, without a model."""

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from services.observers.quick import DATA_FILE, load_rules, quick_rules


@pytest.fixture(scope="module")
def rules():
    return quick_rules()


def test_pain_becomes_one_compact_health_guidance_line(rules):
    observation = rules.observe("My back has been hurting all week.")
    assert observation.signal_ids == ["pain"]
    assert observation.guidance == "[HEALTH] They mentioned pain. Ask how they are feeling."


def test_patterns_match_whole_words_in_any_case(rules):
    assert rules.observe("I'm in PAIN").signal_ids == ["pain"]
    assert rules.observe("I'm flying to Spain").signals == ()  # "pain" inside a word
    assert rules.observe("bye-bye then").goodbye == "strong"
    assert rules.observe("I'll stop by tomorrow").goodbye is None  # "by" is not "bye"


def test_several_signals_are_ordered_most_urgent_first_and_capped_at_three_categories(rules):
    observation = rules.observe(
        "My husband fell yesterday, I'm so worried, my back hurts and what day is it?")
    assert observation.categories == ["cognitive", "emotion", "family", "health"]
    tags = re.findall(r"\[([A-Z]+)\]", observation.guidance)
    assert tags == ["HEALTH", "COGNITIVE", "EMOTION"]


def test_emotion_signals_carry_valence_and_intensity(rules):
    (signal,) = rules.observe("Honestly I'm just so frustrated with all this").signals
    assert signal.id == "frustrated" and signal.valence < 0 and 0 < signal.intensity <= 1


def test_a_strong_goodbye_a_weak_one_and_one_taken_back(rules):
    assert rules.observe("Okay, thanks, goodbye!").goodbye == "strong"
    assert rules.observe("I think that's all for today").goodbye == "weak"
    taken_back = rules.observe("Bye, oh wait, one more thing")
    assert taken_back.goodbye is None and taken_back.false_goodbye
    assert "GOODBYE" not in (taken_back.guidance or "")
    # "Wait" before the goodbye does not take it back.
    assert rules.observe("Wait, no, that's fine. Goodbye.").goodbye == "strong"


def test_engagement_follows_how_much_the_caller_says(rules):
    assert rules.observe("Yes.").engagement == "low"
    assert rules.observe("I would like to come in on Tuesday if possible").engagement == "medium"
    assert rules.observe(" ".join(["word"] * 30)).engagement == "high"


def test_ordinary_booking_words_signal_nothing(rules):
    observation = rules.observe("I need a checkup tomorrow morning.")
    assert observation.signals == () and observation.guidance is None
    assert observation.tokens == 150


def test_the_reply_length_follows_the_most_demanding_signal(rules):
    assert rules.observe("I can't breathe").tokens == 350
    assert rules.observe("I'm in a hurry").tokens == 80


def _write(tmp_path: Path, change) -> Path:
    data = yaml.safe_load(DATA_FILE.read_text())
    change(data)
    path = tmp_path / "patterns.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_pattern_file_with_a_broken_regex_is_refused_at_load(tmp_path):
    def broken(data):
        data["categories"]["health"]["patterns"][0]["regex"] = "(unclosed"

    with pytest.raises(ValidationError, match="bad regular expression"):
        load_rules(_write(tmp_path, broken))


def test_a_pattern_file_with_a_duplicate_id_is_refused_at_load(tmp_path):
    def duplicate(data):
        patterns = data["categories"]["health"]["patterns"]
        patterns.append(dict(patterns[0]))

    with pytest.raises(ValidationError, match="used twice"):
        load_rules(_write(tmp_path, duplicate))


def test_emotion_patterns_must_say_how_they_feel(tmp_path):
    def bare(data):
        del data["categories"]["emotion"]["patterns"][0]["valence"]

    with pytest.raises(ValidationError, match="valence and intensity"):
        load_rules(_write(tmp_path, bare))
