"""Audio verification: a second PocketSphinx pass over a field's audio, held to its grammar.

When the agent captures a phone number, a date or a member id, the caller's audio for
that turn is decoded again with a JSGF grammar that admits only that field
(processors/world/data/grammars/*.gram). A recogniser that can only hear digits cannot
turn "five five five" into "fine, fine", so its reading is a check on the open-vocabulary
transcript, and a score says how well the field's words fit the audio at all.

Decoding holds the GIL (services/pocketsphinx/stt.py), so it runs in spawned worker processes:
`FieldRecognizer` is the async front, `recognize_field` what a worker runs. Audio is
conditioned exactly as for transcription (`condition_audio`: trimmed, 16 kHz, noise floor).

Measured with ``python -m bench.field_grammar`` (eSpeak NG speech at 8 kHz): about half
of phone numbers and dates come back exactly right and spelled member ids rarely (the
letters b, c, d, p, t, v, z differ mostly above 4 kHz); unrelated speech gets no value
or a low score. A reading is evidence to weigh against the transcript, not the truth.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from loguru import logger

from language.fields import normalize_member_id, normalize_phone, parse_date
from language.understanding import spoken_numbers_to_digits
from lib.worker_processes import LazyProcessPool, ProcessWide
from services.pocketsphinx.pronunciation import CmuDictionary
from services.pocketsphinx.stt import DECODER_SAMPLE_RATE, decode_utterance

if TYPE_CHECKING:
    from pocketsphinx import Decoder

FieldKind = Literal["phone", "date", "member_id"]
FIELD_KINDS: tuple[FieldKind, ...] = get_args(FieldKind)
GRAMMAR_DIR = Path(__file__).resolve().parent / "data" / "grammars"

# Letters said as letters: CMUdict lists "a" as the article (AH) first and "id" as in
# Freud (IH D), and the article's short vowel would match almost any sound.
_PRONUNCIATIONS = {"a": "EY", "id": "AY D IY"}
# Phone audio stops at 4 kHz, where most of the hiss of s and z lies; the bundled
# wideband model hears what is left of "six" and "zero" as h. Every word with s or z
# also gets a variant with HH: on the development set, phone numbers 5 -> 13 of 30 right,
# dates 14 -> 21 of 30.
_NARROWBAND_HISS = {"S": "HH", "Z": "HH"}
# Decoder settings beyond the model's defaults, chosen on 90 synthetic utterances kept
# apart from the tests and the bench. A grammar of short words invites insertions ("six"
# heard as "three eight"): a stiffer word insertion penalty (default 0.65) and cheaper
# pauses (silprob, default 0.005) answer that. maxhmmpf bounds a decode's work (with a
# lower language weight one member id took 190 s). Without bestpath no lattice is built,
# which cost member ids 1.5 s a decode; the score needs only the Viterbi path.
_DECODER_SETTINGS: dict[str, object] = {
    "wip": 1e-3,
    "silprob": 0.05,
    "maxhmmpf": 5000,
    "bestpath": False,
}

_DIGIT_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine".split())} | {"oh": "0"}
_MONTHS = frozenset(
    "january february march april may june july august september october november december"
    .split()
)


# --- Grammars and their dictionary -------------------------------------------------------


@dataclass(frozen=True)
class FieldGrammar:
    """One field's JSGF grammar text and the words it uses."""

    kind: FieldKind
    jsgf: str
    words: frozenset[str]


def grammar_words(jsgf: str) -> frozenset[str]:
    """The spoken words of a JSGF grammar: not comments, rule names, weights or syntax."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", jsgf, flags=re.S)
    text = re.sub(r"#JSGF[^;]*;|grammar\s+[\w.]+;|\bpublic\b|<[^>]*>|/[\d.]+/", " ", text)
    return frozenset(re.findall(r"[a-z][a-z']*", text))


def _pronunciations(word: str) -> list[str]:
    """Every pronunciation of `word` the decoder gets: CMUdict's (or ours), then narrowband."""
    if word in _PRONUNCIATIONS:
        variants = [_PRONUNCIATIONS[word]]
    else:
        lines = CmuDictionary.bundled().dictionary_lines([word])
        variants = [line.split(" ", 1)[1] for line in lines]
    for phones in list(variants):
        hushed = " ".join(_NARROWBAND_HISS.get(p, p) for p in phones.split())
        if hushed not in variants:
            variants.append(hushed)
    return variants


@lru_cache(maxsize=None)
def field_grammar(kind: FieldKind) -> FieldGrammar:
    """The grammar for `kind`, read and checked once: every word needs a pronunciation."""
    jsgf = (GRAMMAR_DIR / f"{kind}.gram").read_text(encoding="utf-8")
    words = grammar_words(jsgf)
    dictionary = CmuDictionary.bundled()
    missing = sorted(w for w in words if w not in _PRONUNCIATIONS and w not in dictionary)
    if missing:
        raise ValueError(f"{kind} grammar: no pronunciation for {missing}")
    return FieldGrammar(kind, jsgf, words)


@lru_cache(maxsize=1)
def dictionary_path() -> str:
    """A dictionary of every grammar's words, written once and cached on disk by content.

    Only the grammars' 110 words: a decoder loads in 0.2 s, against 2 s for all of CMUdict.
    """
    lines: list[str] = []
    for word in sorted(set().union(*(field_grammar(k).words for k in FIELD_KINDS))):
        for index, phones in enumerate(_pronunciations(word)):
            lines.append(f"{word if index == 0 else f'{word}({index + 1})'} {phones}")
    text = "\n".join(lines) + "\n"
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
    digits = "".join(
        _DIGIT_WORDS[w] * (2 if i and words[i - 1] == "double" else 1)
        for i, w in enumerate(words)
        if w in _DIGIT_WORDS
    )
    return normalize_phone(digits) if 7 <= len(digits) <= 11 else None


def _one_number(words: list[str]) -> int | None:
    spoken = spoken_numbers_to_digits(" ".join(words))
    return int(spoken) if spoken.isdigit() else None


def date_value(hypothesis: str, today: date | None = None) -> str | None:
    """ISO date from a date-grammar hypothesis, or None.

    Day and year are told apart here before `parse_date` sees them: read as one run,
    "march fourteen nineteen forty eight" would make "march 1419 48".
    """
    words = hypothesis.split()
    month_at = next((i for i, w in enumerate(words) if w in _MONTHS), None)
    if month_at is None:
        return None
    after = words[month_at + 1 :]
    day = year = None
    if month_at and words[month_at - 1] == "of":  # "[the] fourteenth of march 1948"
        before = words[: month_at - 1]
        day = next(
            (n for i in range(len(before)) if (n := _one_number(before[i:])) is not None), None
        )
        year = _one_number(after)
    else:  # "march [the] fourteenth 1948"
        after = after[1:] if after[:1] == ["the"] else after
        for split in range(1, len(after)):
            day, year = _one_number(after[:split]), _one_number(after[split:])
            if day is not None and year is not None and year >= 1000:
                break
    if day is None or year is None or not 1 <= day <= 31 or not 1000 <= year <= 9999:
        return None
    parsed = parse_date(f"{words[month_at]} {day} {year}", today or date.today())
    return parsed.isoformat() if parsed is not None else None


def member_id_value(hypothesis: str) -> str | None:
    """The canonical member id from a member-id-grammar hypothesis (its lead-in dropped)."""
    words = hypothesis.split()
    symbols = [_DIGIT_WORDS.get(w, w) for w in words if w in _DIGIT_WORDS or len(w) == 1]
    return normalize_member_id("".join(symbols))


_VALUES = {"phone": phone_value, "date": date_value, "member_id": member_id_value}


def field_value(kind: FieldKind, hypothesis: str) -> str | None:
    """The canonical value a grammar hypothesis holds, or None when it holds none."""
    return _VALUES[kind](hypothesis) if hypothesis else None


# --- Confidence ---------------------------------------------------------------------------

# Acoustic score per speech frame (see `confidence`) mapped linearly onto 1..9 between
# these two. On the development set, readings of the field that was said scored -31 to
# -51 (median -40: score 7), unrelated speech forced through a grammar -50 to -72.
FIT_BEST = -35.0
FIT_WORST = -60.0
UNPARSED_MAX_SCORE = 3


def confidence(acoustic_per_frame: float | None, parsed: bool) -> int:
    """1-9 from how well the grammar's words fit the audio, capped when they make no value.

    `acoustic_per_frame` is the acoustic score PocketSphinx reports for the hypothesis's
    words (fillers and silence excluded), summed and divided by the frames those words
    span, in its log domain (base 1.0001, scaled as the decoder scales senone scores).
    PocketSphinx scores each frame against the best senone of that frame, so 0 would be
    a path through the best senone everywhere: the value measures how far the grammar
    forced the words from what the audio holds, the classic likelihood-ratio confidence,
    and it does not grow with the utterance's length. It maps linearly from `FIT_WORST`
    (1) to `FIT_BEST` (9). A hypothesis that does not parse as the field scores at most
    `UNPARSED_MAX_SCORE`; no hypothesis at all scores 1. Calibrated on clean synthetic
    speech: real callers on real lines will score lower for the same accuracy.
    """
    if acoustic_per_frame is None:
        return 1
    fraction = (acoustic_per_frame - FIT_WORST) / (FIT_BEST - FIT_WORST)
    score = round(1 + 8 * min(1.0, max(0.0, fraction)))
    return score if parsed else min(score, UNPARSED_MAX_SCORE)


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
    """This process's decoder with `kind`'s grammar active.

    One decoder per process (about 40 MB each) holds one search per kind, each grammar
    compiled once; switching between them costs nothing measurable.
    """
    global _decoder
    from pocketsphinx import Decoder, get_model_path

    if _decoder is None:
        _decoder = Decoder(
            hmm=str(Path(get_model_path()) / "en-us" / "en-us"),
            dict=dictionary_path(),
            samprate=DECODER_SAMPLE_RATE,
            loglevel="FATAL",
            **_DECODER_SETTINGS,
        )
    if kind not in _searches:
        _decoder.add_jsgf_string(kind, field_grammar(kind).jsgf)
        _searches.add(kind)
    _decoder.activate_search(kind)
    return _decoder


def prepare_worker() -> None:
    """Process-pool initializer: build the decoder and compile every grammar up front."""
    for kind in FIELD_KINDS:
        _decoder_for(kind)


def _acoustic_per_frame(decoder: Decoder) -> float | None:
    """The hypothesis words' acoustic score per frame they span (None without words)."""
    total = 0
    frames = 0
    for segment in decoder.seg() or ():
        if segment.word.startswith(("<", "[", "+")):  # <s>, <sil>, [NOISE], +NSN+ ...
            continue
        total += decoder.logmath.log(segment.ascore) if segment.ascore > 0 else -(10**9)
        frames += segment.end_frame - segment.start_frame + 1
    return total / frames if frames else None


def recognize_field(pcm: bytes, sample_rate: int, kind: FieldKind) -> FieldReading:
    """Decode PCM16 mono at `sample_rate` with `kind`'s grammar (blocking: run in a worker)."""
    decoder = _decoder_for(kind)
    text = decode_utterance(decoder, pcm, sample_rate)
    if not text:
        return FieldReading(kind, "", None, 1)
    value = field_value(kind, text)
    score = confidence(_acoustic_per_frame(decoder), parsed=value is not None)
    return FieldReading(kind, text, value, score)


# --- The async front -----------------------------------------------------------------------


class FieldRecognizer(ProcessWide):
    """Grammar passes in worker processes, for the event loop: never blocks it, never raises.

    The workers (a `LazyProcessPool`, the lifecycle every pool of the service shares)
    start at the first request or at `warm_up`; each builds its decoder and compiles the
    three grammars as it starts (0.7 s with its imports, measured), then serves every call.
    """

    def __init__(self, size: int = 1) -> None:
        self._pool = LazyProcessPool(size, "Field grammar pass", initializer=prepare_worker)

    async def warm_up(self) -> None:
        """Start the workers now rather than on a caller's first captured field."""
        silence = bytes(DECODER_SAMPLE_RATE // 5 * 2)
        await asyncio.gather(*(
            self.recognize(silence, DECODER_SAMPLE_RATE, "phone", timeout_s=60.0)
            for _ in range(self._pool.workers)
        ))

    async def recognize(
        self, pcm: bytes, sample_rate: int, kind: FieldKind, *, timeout_s: float
    ) -> FieldReading | None:
        """The grammar reading of one turn's audio, or None when it took over `timeout_s`
        or the worker failed (logged as a warning; the call goes on without it)."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.to_thread(self._pool.start)  # takes the pool's lock: off the loop
                # On timeout the wrapped future is cancelled: a queued decode is dropped,
                # a running one finishes unseen.
                reading: FieldReading = await self._pool.run(
                    recognize_field, pcm, sample_rate, kind
                )
        except TimeoutError:
            logger.warning(f"Field grammar ({kind}): no reading within {timeout_s:.2f} s")
            return None
        except BrokenProcessPool:  # the pool starts fresh workers on the next request
            logger.warning(f"Field grammar ({kind}): the worker process died")
            return None
        except Exception as e:  # noqa: BLE001 - verification is optional; the call goes on
            logger.warning(f"Field grammar ({kind}) failed: {type(e).__name__}")
            return None
        logger.debug(
            f"Field grammar ({kind}): score {reading.score}, "
            f"{'a' if reading.value else 'no'} value, {time.perf_counter() - started:.2f} s"
        )
        return reading

    def shutdown(self) -> None:
        """Stop the workers (at service shutdown, and in tests and benches)."""
        self._pool.shutdown()
