"""Medical red flags are recognised however the caller says them, and not in ordinary talk."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from processors.safety.red_flags import RULES_FILE, RedFlagRules, load_red_flags, red_flag
from tests.observers.data_files import rewritten


@pytest.mark.parametrize(
    ("said", "flag"),
    [
        ("there's a terrible weight on my chest, like someone's sat on me", "chest_pain"),
        ("my chest is all tight and squeezing", "chest_pain"),
        ("I think I'm having a heart attack", "chest_pain"),
        ("Could I book a check-up? My chest's been crushing since lunch.", "chest_pain"),
        ("his left arm has gone all numb", "limb_weakness"),
        ("my arm's gone dead and I can't feel it", "limb_weakness"),
        ("her smile looks lopsided all of a sudden", "face_droop"),
        ("half his face has sort of dropped", "face_droop"),
        ("mum's talking and the words come out wrong", "speech_trouble"),
        ("he's slurring his words", "speech_trouble"),
        ("I've got a sudden headache like being hit with a bat", "worst_headache"),
        ("it's the worst headache I've ever had", "worst_headache"),
        ("I'm struggling to get my breath", "breathing"),
        ("she's gasping for air", "breathing"),
        ("my lips have gone blue", "breathing"),
        ("the wound is bleeding and it won't stop", "bleeding"),
        ("he's been coughing up blood", "bleeding"),
        ("grandad collapsed in the kitchen", "unconscious"),
        ("she fainted and won't wake up", "unconscious"),
        ("my son is having a fit right now", "seizure"),
        ("my tongue is swelling up after a bee sting", "anaphylaxis"),
        ("I took too many of my sleeping tablets", "overdose"),
        ("I want to end it all", "suicide"),
    ],
)
def test_red_flags_in_everyday_words_are_recognised(said, flag):
    found = red_flag(said)
    assert found is not None and found.flag == flag


@pytest.mark.parametrize(
    "said",
    [
        "I'd like to book a physio for my knee",
        "no chest pain or anything, just a stiff neck",
        "I'm not short of breath, it's my shoulder",
        "I've had lots of blood tests this year",
        "with a heavy heart I'm calling about my late husband's appointment",
        "my arm is sore after the flu jab",
        "I can't lift my arm above my head, it's my frozen shoulder",
        "I need a fitting for my knee brace",
        "I can't breathe through my nose with this cold",
        "the words on the letter were all mixed up, which day is it",
        "what's the worst time to come in, traffic-wise",
    ],
)
def test_ordinary_talk_is_not_a_red_flag(said):
    assert red_flag(said) is None


def test_a_negation_in_another_clause_does_not_hide_a_red_flag():
    assert red_flag("it's not good, there's a tightness across my chest") is not None
    assert red_flag("I'm not having any chest pain") is None


def test_the_evidence_is_the_caller_s_own_words():
    found = red_flag("Hi, there's this pressure in my chest since this morning")
    assert found is not None and found.evidence == "pressure in my chest"


def _rules_with(tmp_path: Path, change) -> Path:
    return rewritten(RULES_FILE, tmp_path, change)


def test_rules_naming_an_unknown_group_are_refused_at_load(tmp_path):
    path = _rules_with(tmp_path, lambda d: d["flags"]["chest_pain"]["near"].append(["chest", "x"]))
    with pytest.raises(ValidationError, match="unknown group 'x'"):
        load_red_flags(path)


def test_a_flag_with_no_evidence_is_refused_at_load(tmp_path):
    path = _rules_with(tmp_path, lambda d: d["flags"].update(empty={}))
    with pytest.raises(ValidationError, match="phrases or near"):
        load_red_flags(path)


def test_the_bundled_rules_load():
    assert RedFlagRules.model_validate(yaml.safe_load(RULES_FILE.read_text())).flags


def test_a_flag_explained_away_does_not_hide_another_in_the_same_turn():
    found = red_flag("I can't breathe through my nose, and now my husband has collapsed")
    assert found is not None and found.flag == "unconscious"


def test_a_phrase_s_evidence_is_the_phrase_said():
    found = red_flag("my son's having a seizure")
    assert (found.flag, found.evidence, found.crisis) == ("seizure", "seizure", False)
    assert red_flag("I want to end it all").crisis


def test_two_words_count_as_near_up_to_the_window_and_no_further():
    assert red_flag("my chest one two three four five pain") is not None  # 6 words apart
    assert red_flag("my chest one two three four five six pain") is None  # 7 words apart


def test_a_negated_mention_does_not_hide_a_later_one():
    found = red_flag("no chest pain yesterday, but today my chest is so tight")
    assert found is not None and found.evidence == "chest is so tight"


def test_a_contraction_is_read_as_its_words():
    assert red_flag("her face's drooping").evidence == "face is drooping"


def test_with_no_negation_reach_nothing_is_negated(tmp_path):
    path = _rules_with(tmp_path, lambda d: d.update(negation_reach=0))
    assert load_red_flags(path).first("no chest pain") is not None
