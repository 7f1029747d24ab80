"""Which missed words become keyterm suggestions: the verified caller words aligned with
what the real-time recognizer wrote (analysis/keyterm_suggestions.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from analysis.keyterm_suggestions import (
    HeardTurn,
    VerifiedSpeech,
    load_rules,
    missed_words,
    rules,
)


def spoken(text: str, *, every_ms: int = 300, confidence: float | None = 0.97):
    return [VerifiedSpeech(word, 1000 + every_ms * i, confidence)
            for i, word in enumerate(text.split())]


def test_a_name_heard_as_other_words_is_proposed_with_what_was_heard_and_when():
    verified = spoken("Could I see Doctor Abernathy on Tuesday")
    heard = [HeardTurn("could i see doctor a burn a the on tuesday")]

    [miss] = missed_words(verified, heard)

    assert (miss.term, miss.heard, miss.at_ms, miss.source) == (
        "Abernathy", "a burn a the", 1000 + 4 * 300, "verification")
    assert miss.weight == 1.0


def test_a_word_heard_as_nothing_is_proposed_with_empty_evidence():
    verified = spoken("my Jardiance prescription ran out")
    [miss] = missed_words(verified, [HeardTurn("my prescription ran out")])
    assert (miss.term, miss.heard) == ("Jardiance", "")


def test_a_call_whose_caller_was_never_transcribed_misses_every_content_word():
    terms = [m.term for m in missed_words(spoken("the Brightwater clinic please"), [])]
    assert terms == ["Brightwater", "clinic"]


@pytest.mark.parametrize("verified_text, heard_text", [
    ("yes that is fine", "it is mine"),               # stopwords and small talk
    ("at four forty five", "at for fourteen five"),   # spoken numbers
    ("on the 23rd at 2:30", "on the third at two"),   # digits
    ("Dr. Ng is my GP", "doctor in is my cheap"),    # fewer than three letters
])
def test_stopwords_numbers_and_short_words_are_never_proposed(verified_text, heard_text):
    assert missed_words(spoken(verified_text), [HeardTurn(heard_text)]) == []


def test_words_already_among_the_calls_keyterms_are_not_proposed_again():
    verified = spoken("I take Xarelto and Eliquis daily")
    heard = [HeardTurn("i take sorrel toe and a lick wiss daily")]

    found = missed_words(verified, heard, keyterms=["xarelto 20 mg"])

    assert [m.term for m in found] == ["Eliquis"]


def test_the_clinics_spelling_and_vocabulary_weigh_in():
    verified = spoken("see doctor okafor's nurse at lakeview")  # a recognizer writes lower case
    heard = [HeardTurn("see doctor oak offers nurse at lake you")]

    found = missed_words(verified, heard, lexicon=["Dr. James Okafor", "Lakeview"],
                         spellings={"okafor": "Okafor", "lakeview": "Lakeview"})

    assert [(m.term, m.weight) for m in found] == [
        ("Okafor", rules().lexicon_weight), ("Lakeview", rules().lexicon_weight)]


def test_an_unsure_real_time_word_strengthens_the_evidence():
    verified = spoken("a refill of Wegovy please")
    sure = [HeardTurn("a refill of we go v please", (0.9, 0.9, 0.9, 0.95, 0.9, 0.9, 0.9))]
    unsure = [HeardTurn("a refill of we go v please", (0.9, 0.9, 0.9, 0.2, 0.5, 0.3, 0.9))]

    [plain] = missed_words(verified, sure)
    [strong] = missed_words(verified, unsure)

    assert plain.weight == 1.0
    threshold = rules().low_confidence
    assert strong.weight == pytest.approx(1 + (threshold - 0.2) / threshold, abs=1e-3)


def test_a_word_the_batch_model_was_unsure_of_is_no_evidence():
    verified = [*spoken("I need"), VerifiedSpeech("Brilinta", 2000, 0.3)]
    assert missed_words(verified, [HeardTurn("i need brilliant")]) == []


def test_the_rules_file_is_checked_when_read(tmp_path):
    good = load_rules()
    assert "please" in good.stopwords and "twelve" in good.number_words
    unquoted = tmp_path / "rules.yaml"
    unquoted.write_text("version: 1\nmin_letters: 3\nlow_confidence: 0.6\n"
                        "min_verified_confidence: 0.5\nlexicon_weight: 2\n"
                        "number_words: [one]\nstopwords: [yes, the]\n")
    with pytest.raises(ValidationError, match="valid string"):  # bare yes: a boolean
        load_rules(unquoted)
    capital = tmp_path / "capital.yaml"
    capital.write_text(unquoted.read_text().replace("[yes, the]", "[the, The]"))
    with pytest.raises(ValidationError, match="lower-case"):
        load_rules(capital)
    repeated = tmp_path / "repeated.yaml"
    repeated.write_text(unquoted.read_text().replace("[yes, the]", "[the, and, the]"))
    with pytest.raises(ValidationError, match="listed twice"):
        load_rules(repeated)
