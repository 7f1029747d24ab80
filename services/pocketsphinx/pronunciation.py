"""Pronunciations for words PocketSphinx's dictionary lacks, derived from eSpeak NG.

Keyterms (drug names, surnames) are often missing from CMUdict, and a word that
is not in the dictionary can never be recognised. eSpeak's letter-to-sound rules
give its phoneme mnemonics (US English voice); this table maps them onto the
CMU ARPAbet phones of the bundled en-us acoustic model (no stress digits).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# The context-independent phones of PocketSphinx's en-us acoustic model.
ARPABET_PHONES: frozenset[str] = frozenset(
    "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH "
    "UH UW V W Y Z ZH".split()
)

# eSpeak NG ASCII phoneme mnemonics (en-us voice) -> ARPAbet. Inventory taken by
# phonemizing every CMUdict headword; r-coloured and syllabic phonemes expand.
ESPEAK_TO_ARPABET: dict[str, tuple[str, ...]] = {
    # Consonants
    "p": ("P",), "b": ("B",), "t": ("T",), "d": ("D",), "k": ("K",), "g": ("G",),
    "f": ("F",), "v": ("V",), "T": ("TH",), "D": ("DH",), "s": ("S",), "z": ("Z",),
    "S": ("SH",), "Z": ("ZH",), "h": ("HH",), "tS": ("CH",), "dZ": ("JH",),
    "m": ("M",), "n": ("N",), "N": ("NG",), "l": ("L",), "r": ("R",), "j": ("Y",),
    "w": ("W",), "x": ("K",), "C": ("HH",),
    "t#": ("T",),  # US flap, as in "butter"
    "t2": ("T",),
    "d#": ("D",),
    "?": ("T",),  # glottal stop stands for a /t/ ("frightens")
    "r-": ("R",),
    "l#": ("L",),
    "n-": ("AH", "N"),  # syllabic n
    "m-": ("AH", "M"),
    "@L": ("AH", "L"),  # syllabic l
    # Vowels
    "a": ("AE",), "aa": ("AE",), "a#": ("AH",), "a2": ("AH",),
    "A:": ("AA",), "A": ("AA",), "0": ("AA",), "A~": ("AA", "N"),
    "E": ("EH",), "e": ("EH",), "eI": ("EY",),
    "I": ("IH",), "I2": ("IH",), "I#": ("IH",), "i": ("IY",), "i:": ("IY",), "i::": ("IY",),
    "O": ("AO",), "O:": ("AO",), "O2": ("AO",), "O~": ("AO", "N"),
    "oU": ("OW",), "o": ("OW",), "OI": ("OY",),
    "U": ("UH",), "u:": ("UW",), "u": ("UW",),
    "V": ("AH",), "@": ("AH",), "@2": ("AH",), "@5": ("AH",), "@-": ("AH",),
    "3": ("ER",), "3:": ("ER",),
    "aI": ("AY",), "aU": ("AW",),
    # R-coloured and centring diphthongs
    "A@": ("AA", "R"), "e@": ("EH", "R"), "i@3": ("IH", "R"), "o@": ("AO", "R"),
    "O@": ("AO", "R"), "U@": ("UH", "R"), "aI3": ("AY", "ER"), "aU@": ("AW", "ER"),
    "i@": ("IY", "AH"), "aI@": ("AY", "AH"),
}

# Stress marks that eSpeak puts before a phoneme; they carry no phone.
_STRESS_MARKS = "',%="
# What PocketSphinx's dictionary can hold: lower-case letters and apostrophes.
_WORD = re.compile(r"[a-z][a-z']*")


@dataclass(frozen=True)
class Pronunciation:
    """A dictionary entry for PocketSphinx: the word and its ARPAbet phones."""

    word: str
    phones: tuple[str, ...]

    @property
    def phone_string(self) -> str:
        return " ".join(self.phones)


def dictionary_words(term: str) -> list[str]:
    """The dictionary-shaped words of a keyterm ("Dr. O'Neil-Ruiz" -> dr, o'neil, ruiz)."""
    return _WORD.findall(term.lower().replace("’", "'"))


def espeak_to_arpabet(phonemes: str, separator: str = "_") -> tuple[str, ...]:
    """ARPAbet phones for eSpeak mnemonics joined by `separator` (words by spaces).

    Marks and mnemonics the table does not know (linking ";", length ":") are
    skipped: a near-miss pronunciation helps the recogniser more than none.
    """
    phones: list[str] = []
    for word in phonemes.split():
        for token in word.split(separator):
            for phone in ESPEAK_TO_ARPABET.get(token.lstrip(_STRESS_MARKS), ()):
                if phones and _merges(phones[-1], phone):
                    continue
                phones.append(phone)
    return tuple(phones)


def _merges(previous: str, phone: str) -> bool:
    """eSpeak writes a linking r after r-coloured vowels ("3_r"); CMUdict has one R.

    Doubled phones ("IH IH") likewise come from eSpeak's finer vowel inventory.
    """
    return phone == previous or (phone == "R" and previous == "ER")


def derive_pronunciation(word: str, phonemize: Callable[[str], str]) -> Pronunciation | None:
    """A pronunciation for one dictionary word from `phonemize` (eSpeak, "_"-separated)."""
    phones = espeak_to_arpabet(phonemize(word))
    return Pronunciation(word, phones) if phones else None


class CmuDictionary:
    """PocketSphinx's bundled CMU pronouncing dictionary, read once per process.

    Keyterms already in it keep their curated pronunciation; only the rest are
    derived from eSpeak.
    """

    def __init__(self, entries: dict[str, list[str]]) -> None:
        self._entries = entries

    @classmethod
    def bundled(cls) -> CmuDictionary:
        return _bundled_dictionary()

    @classmethod
    def read(cls, path: Path) -> CmuDictionary:
        entries: dict[str, list[str]] = {}
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                head, _, phones = line.strip().partition(" ")
                if head and phones:
                    entries.setdefault(_VARIANT.sub("", head), []).append(phones.strip())
        return cls(entries)

    def __contains__(self, word: str) -> bool:
        return word in self._entries

    def lookup(self, word: str) -> Pronunciation | None:
        """The first pronunciation of `word` (lower case), or None when it is missing."""
        variants = self._entries.get(word)
        return Pronunciation(word, tuple(variants[0].split())) if variants else None

    def dictionary_lines(self, words: Iterable[str]) -> list[str]:
        """Dictionary-file lines (all variants) for `words`, skipping unknown ones."""
        lines: list[str] = []
        for word in sorted(set(words)):
            for index, phones in enumerate(self._entries.get(word, ())):
                head = word if index == 0 else f"{word}({index + 1})"
                lines.append(f"{head} {phones}")
        return lines


# "read(2)" is the second pronunciation of "read".
_VARIANT = re.compile(r"\(\d+\)$")


@lru_cache(maxsize=1)
def _bundled_dictionary() -> CmuDictionary:
    from pocketsphinx import get_model_path

    return CmuDictionary.read(Path(get_model_path()) / "en-us" / "cmudict-en-us.dict")
