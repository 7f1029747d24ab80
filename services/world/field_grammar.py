"""Audio verification: a second PocketSphinx pass over a field's audio, held to its grammar.

When the agent captures a phone number, a date or a member id, the caller's audio for
that turn is decoded again with a JSGF grammar that admits only that field
(services/world/data/grammars/*.gram). A recogniser that can only hear digits cannot
hear "five five five" as "fine, fine", so its reading is a check on the open-vocabulary
transcript. The grammars use only words of PocketSphinx's bundled CMU dictionary, and
a dictionary of just those words keeps a decoder's load at about 0.2 s.

Decoding holds the GIL (services/local_stt.py), so it runs in a spawned worker process:
`FieldRecognizer` is the async front, `recognize_field` what a worker runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import re
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, get_args

from loguru import logger

from services.local_stt import DECODER_SAMPLE_RATE, _model_dir, condition_audio
from services.pronunciation import CmuDictionary
from services.worker_processes import spawn_executor
from services.world.fields import normalize_member_id, normalize_phone, parse_date

if TYPE_CHECKING:
    from pocketsphinx import Decoder

FieldKind = Literal["phone", "date", "member_id"]
FIELD_KINDS: tuple[FieldKind, ...] = get_args(FieldKind)
GRAMMAR_DIR = Path(__file__).resolve().parent / "data" / "grammars"

# Spelled letters and "id" said as letters: CMUdict lists "a" as the article (AH) first
# and "id" as in Freud (IH D), and the article would match any short vowel.
_PRONUNCIATIONS = {"a": "EY", "id": "AY D IY"}
# Decoder settings beyond the bundled model's defaults (tuned on synthetic speech kept
# apart from the tests and the bench).
_DECODER_SETTINGS: dict[str, object] = {}

_DIGIT_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine".split())} | {"oh": "0"}
_MONTHS = (
    "january february march april may june july august september october november december"
).split()


# --- Grammars ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldGrammar:
    """One field's JSGF grammar text and the words it uses."""

    kind: FieldKind
    jsgf: str
    words: frozenset[str]


def grammar_words(jsgf: str) -> frozenset[str]:
    """The spoken words (tokens) of a JSGF grammar: not rule names, weights or syntax."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", jsgf, flags=re.S)
    text = re.sub(r"#JSGF[^;]*;|grammar\s+[\w.]+;|\bpublic\b|<[^>]*>|/[\d.]+/", " ", text)
    return frozenset(re.findall(r"[a-z][a-z']*", text))


@lru_cache(maxsize=None)
def field_grammar(kind: FieldKind) -> FieldGrammar:
    """The grammar for `kind`, read and checked once: every word needs a pronunciation."""
    jsgf = (GRAMMAR_DIR / f"{kind}.gram").read_text(encoding="utf-8")
    words = grammar_words(jsgf)
    missing = sorted(w for w in words if w not in _PRONUNCIATIONS and w not in _dictionary())
    if missing:
        raise ValueError(f"{kind} grammar: no pronunciation for {missing}")
    return FieldGrammar(kind, jsgf, words)


NARROWBAND_MODE = ""


def _narrowband(phones: str) -> list[str]:
    if not NARROWBAND_MODE:
        return []
    out = []
    for mode in NARROWBAND_MODE.split(","):
        if mode == "hh":
            v = " ".join("HH" if p in ("S", "Z") else p for p in phones.split())
        elif mode == "drop":
            v = " ".join(p for p in phones.split() if p not in ("S", "Z")) or phones
        elif mode == "hhall":
            v = " ".join("HH" if p in ("S", "Z", "F", "TH", "SH") else p for p in phones.split())
        out.append(v)
    return out


def _dictionary() -> CmuDictionary:
    return CmuDictionary.bundled()


@lru_cache(maxsize=1)
def dictionary_path() -> str:
    """A dictionary of every grammar's words, written once and cached on disk by content."""
    words = sorted(set().union(*(field_grammar(k).words for k in FIELD_KINDS)))
    lines: list[str] = []
    for word in words:
        variants = [_PRONUNCIATIONS[word]] if word in _PRONUNCIATIONS else _dictionary()._entries[word]
        variants = list(dict.fromkeys(variants + [v for p in variants for v in _narrowband(p)]))
        lines += [f"{word if i == 0 else f'{word}({i + 1})'} {p}" for i, p in enumerate(variants)]
    text = "\n".join(sorted(lines)) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "clinic-voice-agent-grammar" / digest / "fields.dict"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    return str(path)


# --- From hypothesis to field value --------------------------------------------------------


def phone_value(hypothesis: str) -> str | None:
    """E.164 from a phone-grammar hypothesis ("double five" is two fives), or None."""
    words = hypothesis.split()
    digits: list[str] = []
    for i, word in enumerate(words):
        if word in _DIGIT_WORDS:
            digits.append(_DIGIT_WORDS[word] * (2 if i and words[i - 1] == "double" else 1))
    spoken = "".join(digits)
    if not 7 <= len(spoken) <= 11:
        return None
    return normalize_phone(spoken)


def _one_number(words: list[str]) -> int | None:
    from flows.understanding import spoken_numbers_to_digits

    spoken = spoken_numbers_to_digits(" ".join(words))
    return int(spoken) if spoken.isdigit() else None


def date_value(hypothesis: str, today: date | None = None) -> str | None:
    """ISO date from a date-grammar hypothesis, or None.

    The day and the year are split apart here rather than by `parse_date`: read as one
    run, "march fourteen nineteen forty eight" makes "1419 48".
    """
    words = hypothesis.split()
    month_at = next((i for i, w in enumerate(words) if w in _MONTHS), None)
    if month_at is None:
        return None
    month, after = words[month_at], words[month_at + 1 :]
    if month_at and words[month_at - 1] == "of":  # "[the] fourteenth of march 1948"
        before = words[: month_at - 1]
        start = max((i + 1 for i, w in enumerate(before) if w in ("the", "on", "is")), default=0)
        day, year = _one_number(before[start:]), _one_number(after)
    else:  # "march [the] fourteenth 1948"
        if after[:1] == ["the"]:
            after = after[1:]
        day = year = None
        for split in range(1, len(after)):
            day, year = _one_number(after[:split]), _one_number(after[split:])
            if day is not None and year is not None and year >= 1000:
                break
    if day is None or year is None or not 1 <= day <= 31 or not 1000 <= year <= 9999:
        return None
    parsed = parse_date(f"{month} {day} {year}", today or date.today())
    return parsed.isoformat() if parsed is not None else None


def member_id_value(hypothesis: str) -> str | None:
    """The canonical member id from a member-id-grammar hypothesis (lead-in dropped)."""
    symbols = [
        _DIGIT_WORDS[w] if w in _DIGIT_WORDS else w
        for w in hypothesis.split()
        if w in _DIGIT_WORDS or len(w) == 1
    ]
    return normalize_member_id("".join(symbols))


_VALUES = {"phone": phone_value, "date": date_value, "member_id": member_id_value}


def field_value(kind: FieldKind, hypothesis: str) -> str | None:
    """The canonical value a grammar hypothesis holds, or None when it holds none."""
    return _VALUES[kind](hypothesis) if hypothesis else None


# --- Decoding, inside a worker process -----------------------------------------------------


@dataclass(frozen=True)
class FieldReading:
    """What the grammar pass heard: its words, the field value they hold, a 1-9 confidence."""

    kind: FieldKind
    hypothesis: str
    value: str | None
    score: int


_decoder: Decoder | None = None
_searches: set[str] = set()


def _decoder_for(kind: FieldKind) -> Decoder:
    """This process's decoder with `kind`'s grammar active; each grammar is compiled once."""
    global _decoder
    from pocketsphinx import Decoder

    if _decoder is None:
        _decoder = Decoder(
            hmm=str(_model_dir() / "en-us"),
            dict=dictionary_path(),
            loglevel="FATAL",
            **({"samprate": DECODER_SAMPLE_RATE} | _DECODER_SETTINGS),
        )
    if kind not in _searches:
        _decoder.add_jsgf_string(kind, field_grammar(kind).jsgf)
        _searches.add(kind)
    _decoder.activate_search(kind)
    return _decoder


def recognize_field(pcm: bytes, sample_rate: int, kind: FieldKind) -> FieldReading:
    """Decode PCM16 mono at `sample_rate` with `kind`'s grammar (blocking: run in a worker)."""
    decoder = _decoder_for(kind)
    audio = condition_audio(pcm, sample_rate)
    decoder.reinit_feat()  # each utterance alone: no cepstral mean carried over
    decoder.start_utt()
    try:
        decoder.process_raw(audio, full_utt=True)
    finally:
        decoder.end_utt()
    hypothesis = decoder.hyp()
    text = hypothesis.hypstr.strip() if hypothesis is not None else ""
    value = field_value(kind, text)
    return FieldReading(kind, text, value, 1)
