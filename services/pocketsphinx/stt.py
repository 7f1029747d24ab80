"""Offline speech-to-text for Pipecat: PocketSphinx on VAD-segmented caller audio.

Three measured facts shape this module (numbers in docs/PERFORMANCE.md, from
``python -m bench.stt_wer`` on 41 synthetic scheduling utterances at 8 kHz):

* PocketSphinx's general English language model gets most words of short phone
  answers wrong (74% WER) and decodes slowly (RTF ~0.5), so calls use a trigram
  model of scheduling speech built at first use from
  ``services/pocketsphinx/data/scheduling_lm.yaml`` (38% WER, RTF ~0.08). The general model
  stays available (``language_model="general"``).
* PocketSphinx holds the GIL while it decodes: decoding in a thread stalled the
  event loop by up to 0.17 s (scheduling model) and 0.9 s (general model). So the
  decoders live in worker processes: a process-wide pool, one decoder per process
  and per CPU, shared by every call.
* Exact digital silence (synthetic speech, mu-law silence, the padding Pipecat
  appends to each segment) derails the decoder's noise tracking; a faint, seeded
  noise floor is mixed in before decoding.

Workers are spawned, not forked (the parent runs threads), so a script that
starts decoding must guard its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import random
import re
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncGenerator, Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import soxr
import yaml
from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    StartFrame,
    TranscriptionFrame,
)
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.transcriptions.language import Language
from pipecat.utils.time import time_now_iso8601
from pipecat.utils.tracing.service_decorators import traced_stt

from lib.worker_processes import LazyProcessPool, cpu_share
from services.pocketsphinx.pronunciation import (
    CmuDictionary,
    Pronunciation,
    derive_pronunciation,
    dictionary_words,
)

if TYPE_CHECKING:
    from pocketsphinx import Decoder

LanguageModelName = Literal["scheduling", "general"]

# The bundled acoustic model is 16 kHz wideband; phone audio is upsampled to it.
DECODER_SAMPLE_RATE = 16000
# Standard deviation (PCM16 units, about -50 dBFS) of the noise floor mixed into every
# segment: inaudible on real calls, enough to keep silence from being exact zeros.
# 100 beat 30, 60, 160, 300 and 1000 on a development set kept apart from the bench.
NOISE_FLOOR = 100.0
# Silence Pipecat appends to each VAD segment so the last word is finished (its default).
SEGMENT_TAIL_S = 0.5
# Sound above this (PCM16, about -40 dBFS) starts and ends a segment's speech; this much
# silence is kept either side of it (`trimmed`).
TRIM_THRESHOLD = 300
TRIM_PAD_S = 0.35
# End of speech to transcript, p99: bench/stt_wer.py measures p95 segment latency of
# about 0.3-0.5 s on 2 vCPUs with one call; the rest is headroom for concurrent calls.
POCKETSPHINX_TTFS_P99 = 0.6
CORPUS_FILE = Path(__file__).resolve().parent / "data" / "scheduling_lm.yaml"


# --- Scheduling language model ------------------------------------------------------


@dataclass(frozen=True)
class LanguageModelFiles:
    """What a decoder loads: an n-gram model and the dictionary covering its words."""

    name: LanguageModelName
    lm_path: str
    dictionary_path: str
    vocabulary: frozenset[str] = frozenset()  # empty for the general model (whole dictionary)


_ONES = "zero one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
_ORDINALS += [f"twenty {o}" for o in _ORDINALS[:9]] + ["thirtieth", "thirty first"]
_MONTHS = (
    "january february march april may june july august september october november december"
).split()


def spoken_number(n: int) -> str:
    """0-99 as words ("forty five")."""
    if n < 10:
        return _ONES[n]
    if n < 20:
        return _TEENS[n - 10]
    tens, ones = divmod(n, 10)
    return _TENS[tens - 2] + (f" {_ONES[ones]}" if ones else "")


class _CorpusGenerator:
    """Expands the YAML templates into spoken-form sentences, deterministically."""

    def __init__(self, spec: dict, rng: random.Random) -> None:
        self._lists: dict[str, list[str]] = {}
        for name, values in spec["slots"].items():
            if not all(isinstance(v, str) for v in values):
                # YAML reads a bare yes/no/on/off as a boolean: quote them in the file.
                raise ValueError(f"slot {name!r} has a non-text entry: {values}")
            self._lists[str(name)] = values
        self._rng = rng
        self._generated = {
            "number": lambda: spoken_number(rng.randint(1, 99)),
            "ordinal": lambda: rng.choice(_ORDINALS),
            "time": self._time,
            "date": self._date,
            "year": self._year,
            "digits": lambda: self._digits(rng.randint(3, 6)),
            "phone": lambda: self._digits(10),
            "when": self._when,
        }

    def sentence(self, template: str) -> str:
        text = template
        while (match := re.search(r"\{(\w+)\}", text)) is not None:
            text = text[: match.start()] + self._fill(match.group(1)) + text[match.end() :]
        return " ".join(text.split())

    def _fill(self, slot: str) -> str:
        if slot in self._generated:
            return self._generated[slot]()
        return self._rng.choice(self._lists[slot])

    def _time(self) -> str:
        rng = self._rng
        hour = spoken_number(rng.randint(1, 12))
        minute = rng.choice([0, 0, 15, 30, 30, 45, 5, 10, 20, 40, 50])
        if minute == 0:
            base = rng.choice([hour, f"{hour} o'clock"])
        elif minute < 10:
            base = f"{hour} oh {spoken_number(minute)}"
        else:
            idioms = {15: f"quarter past {hour}", 30: f"half past {hour}", 45: f"quarter to {hour}"}
            choices = [f"{hour} {spoken_number(minute)}"]
            if minute in idioms:
                choices.append(idioms[minute])
            base = rng.choice(choices)
        suffix = rng.choice(["", "", " a m", " p m", " in the morning", " in the afternoon"])
        return rng.choice([base + suffix, base + suffix, "noon", "midday"])

    def _date(self) -> str:
        month, ordinal = self._rng.choice(_MONTHS), self._rng.choice(_ORDINALS)
        return self._rng.choice(
            [f"{month} {ordinal}", f"the {ordinal} of {month}", f"{month} the {ordinal}"]
        )

    def _year(self) -> str:
        year = self._rng.randint(1925, 2024)
        if year >= 2000:
            rest = year - 2000
            if not rest:
                return "two thousand"
            return f"two thousand {self._rng.choice(['', 'and '])}{spoken_number(rest)}"
        century, rest = divmod(year, 100)
        tail = spoken_number(rest) if rest >= 10 else f"oh {spoken_number(rest)}"
        return f"{spoken_number(century)} {tail}"

    def _digits(self, count: int) -> str:
        return " ".join(self._rng.choice(_ONES + ["oh"]) for _ in range(count))

    def _when(self) -> str:
        rng = self._rng
        day = rng.choice(self._lists["day"])
        relative = rng.choice(self._lists["relative_day"])
        options = [
            day,
            f"on {day}",
            f"next {day}",
            f"this {day}",
            f"{day} {rng.choice(self._lists['part_of_day'])}",
            relative,
            f"{relative} {rng.choice(['morning', 'afternoon', ''])}",
            f"in the {rng.choice(self._lists['part_of_day'])}",
            f"on {self._date()}",
            f"at {self._time()}",
            f"on {day} at {self._time()}",
            f"{relative} at {self._time()}",
            f"{day} {self._date()}",
            f"on {self._date()} at {self._time()}",
        ]
        return rng.choice(options)


def scheduling_corpus(spec: dict) -> list[str]:
    """The training sentences: templates drawn by weight, with optional filler and courtesy."""
    rng = random.Random(spec["seed"])
    generator = _CorpusGenerator(spec, rng)
    templates: list[str] = [str(t) for t in spec["templates"]]
    weights = [1.0] * len(templates)
    for template, weight in (spec.get("weighted") or {}).items():
        templates.append(str(template))
        weights.append(float(weight))
    sentences: list[str] = []
    for template in rng.choices(templates, weights=weights, k=int(spec["sentences"])):
        sentence = generator.sentence(template)
        if rng.random() < 0.12:
            opener = rng.choice(["{filler}", "{greeting}", "{affirmative}"])
            sentence = f"{generator.sentence(opener)} {sentence}"
        if rng.random() < 0.08:
            sentence = f"{sentence} {generator.sentence('{polite}')}"
        sentences.append(sentence)
    return sentences


def arpa_trigram(sentences: Iterable[str], discount: float = 0.7) -> str:
    """A backoff trigram model in ARPA text, with absolute discounting.

    Small and dependency-free: the corpus has a few hundred words of vocabulary, so
    the refinements of Kneser-Ney buy little here.
    """
    order = 3
    counts: list[Counter[tuple[str, ...]]] = [Counter() for _ in range(order + 1)]
    for sentence in sentences:
        tokens = ["<s>", *sentence.split(), "</s>"]
        for n in range(1, order + 1):
            for i in range(len(tokens) - n + 1):
                counts[n][tuple(tokens[i : i + n])] += 1
    counts[1].pop(("<s>",), None)
    vocabulary = sorted({w for (w,) in counts[1]} | {"<s>"})
    total = sum(counts[1].values())
    seen_types = len(counts[1])

    context_total: list[dict[tuple[str, ...], int]] = [defaultdict(int) for _ in range(order + 1)]
    context_types: list[dict[tuple[str, ...], int]] = [defaultdict(int) for _ in range(order + 1)]
    for n in range(2, order + 1):
        for gram, count in counts[n].items():
            context_total[n][gram[:-1]] += count
            context_types[n][gram[:-1]] += 1

    @lru_cache(maxsize=None)
    def prob(gram: tuple[str, ...]) -> float:
        n = len(gram)
        if n == 1:
            count = counts[1].get(gram, 0)
            floor = discount * seen_types / total / len(vocabulary)
            return max(count - discount, 0) / total + floor
        context = gram[:-1]
        lower = prob(gram[1:])
        context_count = context_total[n].get(context, 0)
        if not context_count:
            return lower
        count = counts[n].get(gram, 0)
        reserved = discount * context_types[n][context] / context_count
        return max(count - discount, 0) / context_count + reserved * lower

    backoff: dict[tuple[str, ...], float] = {}
    for n in range(1, order):
        children: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
        for gram in counts[n + 1]:
            children[gram[:-1]].append(gram)
        for context, grams in children.items():
            numerator = 1 - sum(prob(g) for g in grams)
            denominator = 1 - sum(prob(g[1:]) for g in grams)
            backoff[context] = max(numerator, 1e-9) / max(denominator, 1e-9)

    sections = [[(w,) for w in vocabulary]] + [sorted(counts[n]) for n in range(2, order + 1)]
    lines = ["\\data\\"] + [f"ngram {n}={len(grams)}" for n, grams in enumerate(sections, 1)]
    lines.append("")
    for n, grams in enumerate(sections, 1):
        lines.append(f"\\{n}-grams:")
        for gram in grams:
            log_prob = -99.0 if gram == ("<s>",) else math.log10(prob(gram))
            line = f"{log_prob:.4f} {' '.join(gram)}"
            if n < order and gram in backoff:
                line += f" {math.log10(backoff[gram]):.4f}"
            lines.append(line)
        lines.append("")
    lines.append("\\end\\")
    return "\n".join(lines) + "\n"


def _model_dir() -> Path:
    """The bundled US English model: acoustic model in en-us/, dictionary and LMs beside it."""
    from pocketsphinx import get_model_path

    return Path(get_model_path()) / "en-us"


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


@lru_cache(maxsize=2)
def language_model_files(name: LanguageModelName = "scheduling") -> LanguageModelFiles:
    """The files for `name`; the scheduling model is built once and cached on disk by content.

    Its dictionary holds only the model's words, which keeps a decoder's load at
    0.1 s and adding a keyterm at 0.5 ms (2 s and 0.4 s with the full dictionary).
    """
    model_dir = _model_dir()
    if name == "general":
        return LanguageModelFiles(
            name, str(model_dir / "en-us.lm.bin"), str(model_dir / "cmudict-en-us.dict")
        )
    source = CORPUS_FILE.read_bytes()
    # This module's code shapes the model too, so a change to either rebuilds it.
    digest = hashlib.sha256(source + Path(__file__).read_bytes()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / "clinic-voice-agent-lm" / digest
    lm_path = cache / "scheduling.arpa"
    dict_path = cache / "scheduling.dict"
    vocab_path = cache / "vocab.txt"
    if not (lm_path.exists() and dict_path.exists() and vocab_path.exists()):
        started = time.perf_counter()
        cache.mkdir(parents=True, exist_ok=True)
        sentences = scheduling_corpus(yaml.safe_load(source))
        dictionary = CmuDictionary.bundled()
        vocabulary = sorted({w for s in sentences for w in s.split()})
        missing = [w for w in vocabulary if w not in dictionary]
        if missing:
            logger.warning(f"scheduling LM: no pronunciation for {missing[:10]}")
        _write_atomically(lm_path, arpa_trigram(sentences))
        _write_atomically(dict_path, "\n".join(dictionary.dictionary_lines(vocabulary)) + "\n")
        _write_atomically(vocab_path, "\n".join(vocabulary) + "\n")  # written last: the marker
        logger.info(
            f"scheduling LM built: {len(sentences)} sentences, {len(vocabulary)} words "
            f"in {time.perf_counter() - started:.2f} s"
        )
    vocabulary = frozenset(vocab_path.read_text(encoding="utf-8").split())
    return LanguageModelFiles(name, str(lm_path), str(dict_path), vocabulary)


# --- Decoding, inside a worker process ----------------------------------------------


@dataclass(frozen=True)
class TimedWord:
    """A recognised word and where it is, in seconds from the start of the audio decoded."""

    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class SegmentWords:
    """What a segmented STT knows of its words' times: seconds from the segment start,
    and where in the segment the caller's audio ended (the VAD stop)."""

    words: tuple[Any, ...]  # objects with .word, .start_s, .end_s (TimedWord)
    audio_end_s: float


@dataclass(frozen=True)
class DecodeResult:
    """A segment's transcript (lower case), its word times, and what it cost."""

    text: str
    audio_seconds: float
    decode_seconds: float
    words: tuple[TimedWord, ...] = ()


@dataclass
class _WorkerState:
    """This worker process's decoder and the keyterm words it has been given."""

    decoder: Decoder
    added_words: set[str] = field(default_factory=set)


_worker: _WorkerState | None = None


def _start_worker(files: LanguageModelFiles) -> None:
    """Process-pool initializer: load this process's decoder once."""
    global _worker
    from pocketsphinx import Decoder

    decoder = Decoder(
        hmm=str(_model_dir() / "en-us"),
        lm=files.lm_path,
        dict=files.dictionary_path,
        samprate=DECODER_SAMPLE_RATE,
        loglevel="FATAL",
    )
    _worker = _WorkerState(decoder)


def _add_pronunciations(state: _WorkerState, pronunciations: Sequence[Pronunciation]) -> None:
    """Add the keyterm words this decoder lacks, once each.

    Each add rebuilds the search: 0.5 ms with the scheduling model's small
    dictionary, about 0.4 s with the general one (once per word per worker).
    """
    decoder = state.decoder
    for pronunciation in pronunciations:
        if pronunciation.word in state.added_words:
            continue
        state.added_words.add(pronunciation.word)
        if decoder.lookup_word(pronunciation.word) is None:
            try:
                decoder.add_word(pronunciation.word, pronunciation.phone_string, update=True)
            except RuntimeError:
                logger.warning("PocketSphinx rejected a keyterm pronunciation")


def trimmed(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """The segment from `TRIM_PAD_S` before its first sound to `TRIM_PAD_S` after its last.

    Where voice activity detection opens and closes a segment moves by a frame or two
    from call to call (its timing, the batched VAD), and PocketSphinx hears the same words
    differently when they start 40 ms later. Cut at the sound itself, the same words give
    the same segment, and the same transcript.
    """
    start, end = trim_bounds(samples, sample_rate)
    return samples[start:end]


def trim_bounds(samples: np.ndarray, sample_rate: int) -> tuple[int, int]:
    """Where `trimmed` cuts: [start, end) sample indices (the whole segment if silent)."""
    loud = np.flatnonzero(np.abs(samples) > TRIM_THRESHOLD)
    if not len(loud):
        return 0, len(samples)
    pad = int(TRIM_PAD_S * sample_rate)
    return max(0, int(loud[0]) - pad), min(len(samples), int(loud[-1]) + pad + 1)


def condition_audio(pcm: bytes, sample_rate: int) -> bytes:
    """PCM16 mono at any rate -> what the decoder hears: trimmed to its sound, 16 kHz,
    with the noise floor."""
    samples = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2").astype(np.float32)
    samples = trimmed(samples, sample_rate)
    if sample_rate != DECODER_SAMPLE_RATE and len(samples):
        samples = soxr.resample(samples, sample_rate, DECODER_SAMPLE_RATE, quality="HQ")
    # Seeded by the audio's length, so the same segment always decodes the same way.
    rng = np.random.default_rng(len(samples))
    samples = samples + rng.normal(0.0, NOISE_FLOOR, len(samples))
    return np.clip(samples, -32768, 32767).astype("<i2").tobytes()


def _decode_segment(
    pcm: bytes, sample_rate: int, pronunciations: tuple[Pronunciation, ...]
) -> DecodeResult:
    """Transcribe one utterance of PCM16 mono at `sample_rate` (runs in a worker)."""
    assert _worker is not None, "decoder worker not initialised"
    _add_pronunciations(_worker, pronunciations)
    audio_seconds = len(pcm) / 2 / sample_rate if sample_rate else 0.0
    started = time.perf_counter()
    text, words = decode_utterance_words(_worker.decoder, pcm, sample_rate)
    return DecodeResult(text, audio_seconds, time.perf_counter() - started, words)


def decode_utterance(decoder: Decoder, pcm: bytes, sample_rate: int) -> str:
    """One utterance's hypothesis ("" for none), decoded on its own.

    Decoders are pooled across calls, and PocketSphinx carries its feature state (the
    live cepstral mean and its frame counts) from one utterance into the next: one
    caller's loud voice changed how the next call's first words were heard. Each
    utterance starts afresh (0.08 ms).
    """
    audio = condition_audio(pcm, sample_rate)
    decoder.reinit_feat()
    decoder.start_utt()
    try:
        decoder.process_raw(audio, full_utt=True)
    finally:
        decoder.end_utt()
    hypothesis = decoder.hyp()
    return hypothesis.hypstr.strip() if hypothesis is not None else ""


def decode_utterance_words(
    decoder: Decoder, pcm: bytes, sample_rate: int
) -> tuple[str, tuple[TimedWord, ...]]:
    """`decode_utterance` plus each word's time from the start of `pcm` (not of the
    trimmed audio the decoder heard): the segmentation of the best path, fillers,
    silences and sentence marks left out, alternate pronunciations ("to(2)") named
    by their word."""
    text = decode_utterance(decoder, pcm, sample_rate)
    if not text:
        return text, ()
    samples = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2")
    offset_s = trim_bounds(samples, sample_rate)[0] / sample_rate if sample_rate else 0.0
    frame_rate = float(decoder.config["frate"])
    words = tuple(
        TimedWord(
            segment.word.split("(", 1)[0],
            round(offset_s + segment.start_frame / frame_rate, 3),
            round(offset_s + (segment.end_frame + 1) / frame_rate, 3),
        )
        for segment in decoder.seg()
        if not _is_filler(segment.word)
    )
    return text, words


def _is_filler(word: str) -> bool:
    return word.startswith(("<", "[", "+")) or word in ("", "<sil>")


# --- The process-wide pool -------------------------------------------------------------


def default_pool_size() -> int:
    """One decoder per CPU of this process's share (`lib.worker_processes.cpu_share`:
    the machine's CPUs divided among the worker processes serving it)."""
    return cpu_share()


class DecoderPool:
    """Decoders in worker processes, shared by every call of this process.

    Workers start lazily (spawned, so they never inherit the parent's threads) and
    each loads one decoder (~60 MB with the pipecat import, 0.1 s for the
    scheduling model). Keyterm pronunciations travel with each request and a
    worker adds the ones it has not seen, so every pooled decoder converges on the
    union of all calls' keyterms.
    """

    _shared: ClassVar[dict[str, DecoderPool]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, language_model: LanguageModelName = "scheduling", size: int | None = None
    ) -> None:
        self.language_model: LanguageModelName = language_model
        self.size = size or default_pool_size()
        self._files: LanguageModelFiles | None = None
        self._pool = LazyProcessPool(
            self.size, f"PocketSphinx pool ({language_model} LM)", initializer=_start_worker,
            initargs=lambda: (self._prepare(),))
        self._warm = False

    @classmethod
    def shared(cls, language_model: LanguageModelName = "scheduling") -> DecoderPool:
        """The pool every call's STT service uses for `language_model`."""
        with cls._shared_lock:
            if language_model not in cls._shared:
                cls._shared[language_model] = cls(language_model)
            return cls._shared[language_model]

    @classmethod
    def started(cls) -> list[DecoderPool]:
        """The shared pools this process has created (to stop them at shutdown)."""
        with cls._shared_lock:
            return list(cls._shared.values())

    @property
    def vocabulary(self) -> frozenset[str]:
        """Words the language model already knows (empty: defer to the dictionary)."""
        return self._prepare().vocabulary

    def _prepare(self) -> LanguageModelFiles:
        if self._files is None:
            self._files = language_model_files(self.language_model)
        return self._files

    async def transcribe(
        self, pcm: bytes, sample_rate: int, pronunciations: Sequence[Pronunciation] = ()
    ) -> DecodeResult:
        """Decode one utterance in a worker; the event loop never waits on the decoder."""
        await asyncio.to_thread(self._pool.start)  # building the LM files is slow once
        try:
            return await self._pool.run(_decode_segment, pcm, sample_rate, tuple(pronunciations))
        except BrokenProcessPool:
            self._warm = False  # the next request starts fresh workers
            raise

    async def warm_up(self) -> None:
        """Start every worker and load its decoder now rather than on a caller's first words.

        Spawning a worker takes about a second (interpreter, imports, model); later
        calls return at once.
        """
        if self._warm:
            return
        silence = bytes(DECODER_SAMPLE_RATE // 5 * 2)
        decodes = [self.transcribe(silence, DECODER_SAMPLE_RATE) for _ in range(self.size)]
        await asyncio.gather(*decodes)
        self._warm = True

    def shutdown(self) -> None:
        """Stop the workers (tests and benches; the shared pool lives as long as the process)."""
        self._pool.shutdown()
        self._warm = False


# --- Keyterms ---------------------------------------------------------------------------


# Written abbreviations in keyterms ("Dr. Nguyen") and the word callers actually say.
_SPOKEN_ABBREVIATIONS = {
    "dr": "doctor", "mr": "mister", "mrs": "missus", "ms": "miss", "st": "saint",
}


def spoken_word(word: str) -> str:
    return _SPOKEN_ABBREVIATIONS.get(word, word)


class KeytermLexicon:
    """Pronunciations for keyterm words the language model lacks, cached per process.

    A word in the CMU dictionary keeps its curated pronunciation; any other word gets
    one derived from eSpeak NG's letter-to-sound rules (services/pocketsphinx/pronunciation.py).
    """

    _cache: ClassVar[dict[str, Pronunciation | None]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def pronunciations(
        cls, keyterms: Iterable[str], known_words: frozenset[str]
    ) -> tuple[Pronunciation, ...]:
        """Blocking (reads the dictionary, calls eSpeak): run it off the event loop."""
        from services.espeak.engine import EspeakEngine

        words = {spoken_word(w) for term in keyterms for w in dictionary_words(term)}
        result: list[Pronunciation] = []
        for word in sorted(words - known_words):
            with cls._lock:
                if word not in cls._cache:
                    found = CmuDictionary.bundled().lookup(word)
                    phonemize = EspeakEngine.shared().phonemes
                    cls._cache[word] = found or derive_pronunciation(word, phonemize)
                pronunciation = cls._cache[word]
            if pronunciation is not None:
                result.append(pronunciation)
        return tuple(result)


def keyterm_spellings(keyterms: Iterable[str]) -> dict[str, str]:
    """Lower-case dictionary word -> the keyterm's own spelling ("ozempic" -> "Ozempic")."""
    spellings: dict[str, str] = {}
    for term in keyterms:
        for token in re.findall(r"[A-Za-z][A-Za-z'’]*", term):
            spellings.setdefault(token.lower().replace("’", "'"), token)
    return spellings


def restore_spelling(text: str, spellings: dict[str, str]) -> str:
    """Give recognised keyterm words their written form, so the LLM sees "Ozempic"."""
    return " ".join(spellings.get(word, word) for word in text.split())


# --- The Pipecat service ---------------------------------------------------------------


@dataclass
class PocketSphinxSTTSettings(STTSettings):
    """Settings for :class:`PocketSphinxSTTService` (``model`` names the language model)."""


class PocketSphinxSTTService(SegmentedSTTService):
    """Offline STT: each VAD segment is decoded by PocketSphinx in the shared process pool.

    Example::

        stt = PocketSphinxSTTService(keyterms=["Ozempic", "Dr. Nguyen"])
    """

    Settings = PocketSphinxSTTSettings
    _settings: PocketSphinxSTTSettings

    def __init__(
        self,
        *,
        keyterms: Sequence[str] = (),
        language_model: LanguageModelName = "scheduling",
        pool: DecoderPool | None = None,
        prepare_at_start: bool = True,
        **kwargs,
    ):
        """Create the service.

        Args:
            keyterms: Words and names to recognise (drug names, clinicians, the clinic).
            language_model: "scheduling" (domain trigram model) or "general" (bundled en-us).
            pool: Decoder pool; the process-wide one for `language_model` by default.
            prepare_at_start: Start the decoders when the call starts; False for a
                recognizer held in reserve (it prepares when `prepare` is called, or
                on its first segment).
            **kwargs: Passed to ``SegmentedSTTService``.
        """
        kwargs.setdefault("ttfs_p99_latency", POCKETSPHINX_TTFS_P99)
        kwargs.setdefault("trailing_silence_secs", SEGMENT_TAIL_S)
        self._segment_tail_s = float(kwargs["trailing_silence_secs"])
        super().__init__(
            settings=self.Settings(model=language_model, language=Language.EN_US), **kwargs
        )
        self._keyterms = tuple(keyterms)
        self._spellings = keyterm_spellings(self._keyterms)
        self._pool = pool or DecoderPool.shared(language_model)
        self._pronunciations: tuple[Pronunciation, ...] | None = None
        self._pronunciations_lock = asyncio.Lock()
        self._prepare_task: asyncio.Task | None = None
        self._prepare_at_start = prepare_at_start

    @property
    def wants_wav_segments(self) -> bool:
        """PocketSphinx reads raw PCM16; a WAV header would be decoded as audio."""
        return False

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame):
        """Start, and get keyterms and decoders ready while the agent greets the caller."""
        await super().start(frame)
        if self._prepare_at_start:
            self.prepare()

    def prepare(self) -> None:
        """Load keyterms and warm the decoders in the background (once)."""
        if self._prepare_task is None:
            self._prepare_task = self.create_task(self._prepare(), name="pocketsphinx-prepare")

    async def stop(self, frame: EndFrame):
        await self._stop_preparing()
        await super().stop(frame)

    async def cancel(self, frame: CancelFrame):
        await self._stop_preparing()
        await super().cancel(frame)

    async def _prepare(self) -> None:
        try:
            await self._keyterm_pronunciations()
            await self._pool.warm_up()
        except Exception as e:  # the first segment retries; nothing is lost
            logger.warning(f"{self}: could not prepare PocketSphinx: {type(e).__name__}: {e}")

    async def _stop_preparing(self) -> None:
        if self._prepare_task is not None and not self._prepare_task.done():
            await self.cancel_task(self._prepare_task)
        self._prepare_task = None

    async def _keyterm_pronunciations(self) -> tuple[Pronunciation, ...]:
        async with self._pronunciations_lock:
            if self._pronunciations is None:
                pool = self._pool
                self._pronunciations = await asyncio.to_thread(
                    lambda: KeytermLexicon.pronunciations(self._keyterms, pool.vocabulary)
                )
                if self._pronunciations:
                    count = len(self._pronunciations)
                    logger.debug(f"{self}: {count} keyterm words added to the decoders")
        return self._pronunciations

    @traced_stt
    async def _handle_transcription(
        self, transcript: str, is_final: bool, language: Language | None = None
    ):
        """Tracing hook (the decorator records the span)."""

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        """Transcribe one VAD segment of raw PCM16 at the pipeline's input rate."""
        try:
            await self.start_processing_metrics()
            pronunciations = await self._keyterm_pronunciations()
            result = await self._pool.transcribe(audio, self.sample_rate, pronunciations)
            await self.stop_processing_metrics()
        except Exception as e:
            logger.warning(f"{self}: PocketSphinx decode failed: {type(e).__name__}")
            yield ErrorFrame(error=f"PocketSphinx decode failed: {e}")
            return
        logger.debug(
            f"{self}: decoded {result.audio_seconds:.2f} s of audio "
            f"in {result.decode_seconds:.2f} s"
        )
        if not result.text:
            return
        text = restore_spelling(result.text, self._spellings)
        await self._handle_transcription(text, True, Language.EN_US)
        logger.debug(f"{self}: transcript of {len(text.split())} words")  # never the words (PHI)
        # Word times for the call record: the segment's caller audio ends where the
        # silence Pipecat pads it with begins, which is when voice activity stopped.
        audio_end_s = max(0.0, result.audio_seconds - self._segment_tail_s)
        yield TranscriptionFrame(
            text, self._user_id, time_now_iso8601(), Language.EN_US, finalized=True,
            result=SegmentWords(result.words, audio_end_s) if result.words else None,
        )
