"""Which words the real-time recognizer missed, read off a call's verified transcript.

The verified caller words (the recording re-transcribed, told the clinic's vocabulary)
are aligned with what the real-time side wrote for the caller (jiwer's word alignment,
both sides normalised alike). A stretch where they differ is a miss of each content word
the verified side has there: not a stopword, not a number, at least `min_letters`
letters, and not already a keyterm of the call. What the real-time side wrote in that
stretch ("" for nothing) is the evidence; a real-time word it was unsure of, and a word of
the clinic's own vocabulary, weigh more. Pure functions: the rules come from
`data/keyterm_suggestions.yaml`, checked when read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jiwer
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from db.stt_suggestions import Misheard

RULES_FILE = Path(__file__).resolve().parent / "data" / "keyterm_suggestions.yaml"
VERIFICATION_SOURCE = "verification"
_WORD = re.compile(r"^[a-z][a-z']*$")
_PUNCTUATION = re.compile(r"[^\w\s']+")
_POSSESSIVE = re.compile(r"['’]s$")


class SuggestionRules(BaseModel):
    """The rules file, checked: lower-case words, each listed once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int
    min_letters: int = Field(ge=1, le=10)
    low_confidence: float = Field(gt=0, le=1)
    min_verified_confidence: float = Field(ge=0, le=1)
    lexicon_weight: float = Field(ge=1, le=10)
    number_words: tuple[str, ...]
    stopwords: tuple[str, ...]

    @field_validator("number_words", "stopwords")
    @classmethod
    def _words(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        bad = [w for w in words if not _WORD.match(w)]
        if bad:
            raise ValueError(f"not lower-case words: {bad[:5]}")
        if len(set(words)) != len(words):
            raise ValueError("a word is listed twice")
        return words

    @property
    def ignored(self) -> frozenset[str]:
        """Stopwords and number words as the alignment sees them (no apostrophes)."""
        return frozenset(normalise(w) for w in (*self.stopwords, *self.number_words))


def load_rules(path: Path = RULES_FILE) -> SuggestionRules:
    with path.open(encoding="utf-8") as handle:
        return SuggestionRules.model_validate(yaml.safe_load(handle))


@lru_cache(maxsize=1)
def rules() -> SuggestionRules:
    return load_rules()


@lru_cache(maxsize=4)
def _ignored(chosen: SuggestionRules) -> frozenset[str]:
    return chosen.ignored


@dataclass(frozen=True)
class VerifiedSpeech:
    """A word of the verified caller channel."""

    word: str
    at_ms: int | None
    confidence: float | None = None


@dataclass(frozen=True)
class HeardTurn:
    """A real-time caller turn: its text, and its words' confidences when the
    recognizer gave them for every word of the text (else None)."""

    text: str
    confidences: tuple[float | None, ...] | None = None


def normalise(text: str) -> str:
    """Lower case, punctuation and apostrophes out ("Dr. O'Neil's" -> "dr oneils"): the
    same rule the transcript score uses."""
    text = _PUNCTUATION.sub(" ", text.lower().replace(".", "")).replace("'", "")
    return " ".join(text.replace("’", "").split())


def content_word(token: str, chosen: SuggestionRules) -> bool:
    """Worth a keyterm: letters only, long enough, not a stopword or a number."""
    return (token.isalpha() and len(token) >= chosen.min_letters
            and token not in _ignored(chosen))


def keyterm_words(keyterms: Iterable[str]) -> frozenset[str]:
    """Every word of the keyterms as alignment sees it ("Dr. Okafor" -> {"dr", "okafor"})."""
    return frozenset(w for term in keyterms for w in tokens(term))


def tokens(text: str) -> list[str]:
    """The words alignment compares: a possessive dropped ("Okafor's" -> "okafor"), then
    normalised (so "2:30" is two tokens and "Dr." is "dr")."""
    return [token for piece in text.split()
            for token in normalise(_POSSESSIVE.sub("", piece.strip(".,;:!?\"()[]"))).split()]


def _verified_tokens(words: Sequence[VerifiedSpeech]) -> list[tuple[str, VerifiedSpeech]]:
    return [(token, word) for word in words for token in tokens(word.word)]


def _heard_tokens(turns: Sequence[HeardTurn]) -> list[tuple[str, float | None]]:
    """The real-time caller words in order, with a confidence when each turn's
    words line up with its text."""
    heard: list[tuple[str, float | None]] = []
    for turn in turns:
        pieces = tokens(turn.text)
        confidences = turn.confidences
        if confidences is None or len(confidences) != len(pieces):
            confidences = (None,) * len(pieces)
        heard.extend(zip(pieces, confidences, strict=True))
    return heard


def _term(word: VerifiedSpeech, token: str, spellings: Mapping[str, str]) -> str:
    """How the term is written: the clinic's own spelling, else the verified word as
    written when it is this one token, else the token."""
    if token in spellings:
        return spellings[token]
    bare = _POSSESSIVE.sub("", word.word.strip(".,;:!?\"()[]"))
    return bare if normalise(bare) == token else token


def _weight(heard: list[tuple[str, float | None]], token: str, lexicon: frozenset[str],
            chosen: SuggestionRules) -> float:
    """1 for a plain miss; up to 2 when the real-time words there were heard with low
    confidence; times `lexicon_weight` for a word of the clinic's vocabulary."""
    weight = 1.0
    known = [c for _, c in heard if c is not None]
    if known and min(known) < chosen.low_confidence:
        weight += (chosen.low_confidence - min(known)) / chosen.low_confidence
    if token in lexicon:
        weight *= chosen.lexicon_weight
    return round(weight, 4)


def missed_words(verified: Sequence[VerifiedSpeech], heard: Sequence[HeardTurn], *,
                 keyterms: Iterable[str] = (), lexicon: Iterable[str] = (),
                 spellings: Mapping[str, str] | None = None,
                 chosen: SuggestionRules | None = None,
                 source: str = VERIFICATION_SOURCE) -> list[Misheard]:
    """Every content word of `verified` the real-time side (`heard`) wrote otherwise or
    not at all, in the order spoken; words of `keyterms` are never proposed again."""
    chosen = chosen or rules()
    spellings = {normalise(k): v for k, v in (spellings or {}).items()}
    skip = keyterm_words(keyterms)
    clinic = keyterm_words(lexicon)
    reference = _verified_tokens(verified)
    hypothesis = _heard_tokens(heard)
    if not reference:
        return []
    ref_text = " ".join(token for token, _ in reference)
    hyp_text = " ".join(token for token, _ in hypothesis)
    if not hyp_text:
        stretches = [(0, len(reference), 0, 0)]
    else:
        stretches = _stretches(jiwer.process_words(ref_text, hyp_text).alignments[0])
    found: list[Misheard] = []
    for ref_start, ref_end, hyp_start, hyp_end in stretches:
        there = hypothesis[hyp_start:hyp_end]
        said = " ".join(token for token, _ in there)
        for token, word in reference[ref_start:ref_end]:
            if not content_word(token, chosen) or token in skip:
                continue
            if word.confidence is not None and word.confidence < chosen.min_verified_confidence:
                continue
            found.append(Misheard(_term(word, token, spellings), said, word.at_ms, source,
                                  _weight(there, token, clinic, chosen)))
    return found


def _stretches(chunks: Sequence[jiwer.AlignmentChunk]) -> list[tuple[int, int, int, int]]:
    """Runs of neighbouring non-equal chunks (a substitution with the insertions beside
    it is one stretch): [ref_start, ref_end) and [hyp_start, hyp_end) of each."""
    stretches: list[tuple[int, int, int, int]] = []
    current: list[int] | None = None
    for chunk in chunks:
        if chunk.type == "equal":
            if current is not None:
                stretches.append(tuple(current))  # type: ignore[arg-type]
                current = None
            continue
        if current is None:
            current = [chunk.ref_start_idx, chunk.ref_end_idx,
                       chunk.hyp_start_idx, chunk.hyp_end_idx]
        else:
            current[1], current[3] = chunk.ref_end_idx, chunk.hyp_end_idx
    if current is not None:
        stretches.append(tuple(current))  # type: ignore[arg-type]
    return stretches
