"""Keyterms missing from the recogniser's dictionary get an ARPAbet pronunciation from eSpeak."""

import jiwer
import pytest

from services.espeak.engine import EspeakEngine
from services.pocketsphinx.pronunciation import (
    ARPABET_PHONES,
    ESPEAK_TO_ARPABET,
    CmuDictionary,
    derive_pronunciation,
    dictionary_words,
    espeak_to_arpabet,
)

pytestmark = pytest.mark.timeout(20)

COMMON_WORDS = (
    "appointment tuesday thursday morning afternoon doctor insurance cancel available "
    "schedule refill pharmacy tomorrow birthday number telephone confirm clinic nurse "
    "billing prescription medicine calendar evening"
).split()


def test_the_mapping_only_produces_phones_of_the_acoustic_model():
    assert {phone for phones in ESPEAK_TO_ARPABET.values() for phone in phones} <= ARPABET_PHONES


def test_stress_marks_and_separators_are_dropped():
    assert espeak_to_arpabet("n_'u:_j_E_n") == ("N", "UW", "Y", "EH", "N")
    assert espeak_to_arpabet("h_@_l_'oU w_'3:_l_d") == ("HH", "AH", "L", "OW", "W", "ER", "L", "D")


def test_keyterms_split_into_dictionary_shaped_words():
    assert dictionary_words("Dr. O'Neil-Ruiz") == ["dr", "o'neil", "ruiz"]


def test_a_drug_name_missing_from_the_dictionary_gets_a_pronunciation():
    dictionary = CmuDictionary.bundled()
    assert "ozempic" not in dictionary
    pronunciation = derive_pronunciation("ozempic", EspeakEngine.shared().phonemes)
    assert pronunciation is not None
    assert pronunciation.phones[:2] == ("OW", "Z") and pronunciation.phones[-2:] == ("IH", "K")


def test_derived_pronunciations_mostly_agree_with_the_dictionary():
    dictionary = CmuDictionary.bundled()
    phonemize = EspeakEngine.shared().phonemes
    reference = [dictionary.lookup(w).phone_string for w in COMMON_WORDS]
    derived = [derive_pronunciation(w, phonemize).phone_string for w in COMMON_WORDS]
    assert jiwer.wer(reference, derived) < 0.15


def test_the_dictionary_lists_every_variant_for_a_reduced_copy():
    assert CmuDictionary.bundled().dictionary_lines(["read", "zzzz"]) == [
        "read R EH D",
        "read(2) R IY D",
    ]
