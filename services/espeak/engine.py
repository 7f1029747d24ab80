"""eSpeak NG through ctypes, confined to one thread of its own.

libespeak-ng keeps its state in globals and is not thread-safe, so every call
into it runs on the engine's dedicated worker thread, and a process-wide lock
makes any second engine take turns with the shared one. The bundled library and data come from
`espeakng_loader`, so nothing is downloaded at run time. Callers stream audio
as eSpeak produces it, with word events, and can abort between buffers.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar

import espeakng_loader
import numpy as np
import soxr
from loguru import logger

from lib.worker_processes import spawn_executor

# speak_lib.h constants (the ABI has been stable since eSpeak 1.x).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000  # report data errors instead of calling exit()
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_ENDPAUSE = 0x1000
_EVENT_LIST_TERMINATED = 0
_EVENT_WORD = 1
_PARAM_RATE = 1
_PARAM_VOLUME = 2
_PARAM_PITCH = 3
_PARAM_RANGE = 4
_EE_OK = 0

# Words per minute eSpeak accepts; values outside are clamped by the library anyway.
MIN_WORDS_PER_MINUTE = 80
MAX_WORDS_PER_MINUTE = 450
DEFAULT_VOICE = "en-us"
DEFAULT_WORDS_PER_MINUTE = 165
DEFAULT_PITCH = 50


@dataclass(frozen=True)
class VoiceShape:
    """How eSpeak sounds beyond its voice and rate (its own 0-100/0-200 scales):
    base pitch, pitch range (monotone 0 .. expressive 100) and volume (100 = normal)."""

    pitch: int = DEFAULT_PITCH
    range: int = 50
    volume: int = 100

    def clamped(self) -> VoiceShape:
        return VoiceShape(min(100, max(0, self.pitch)), min(100, max(0, self.range)),
                          min(200, max(0, self.volume)))

# Audio is handed over every BUFFER_MS; small buffers mean early first audio.
BUFFER_MS = 60


class EspeakError(RuntimeError):
    """eSpeak refused a request (unknown voice, internal error)."""


class _EventId(ctypes.Union):
    _fields_ = [
        ("number", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("string", ctypes.c_char * 8),
    ]


class EspeakEvent(ctypes.Structure):
    """`espeak_EVENT` from speak_lib.h."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # 1-based character index in the input
        ("length", ctypes.c_int),  # characters
        ("audio_position", ctypes.c_int),  # ms from the start of the utterance
        ("sample", ctypes.c_int),  # sample index from the start of the utterance
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(EspeakEvent)
)


@dataclass(frozen=True)
class WordEvent:
    """A word of the input and when it starts in the synthesized audio."""

    word: str
    start_s: float
    char_offset: int  # 0-based offset of the word in the input text


@dataclass(frozen=True)
class SynthesisChunk:
    """PCM16 mono audio at the native rate, and the words that start by its end."""

    audio: bytes
    words: tuple[WordEvent, ...] = ()


@dataclass
class SynthesisResult:
    """What one synthesis produced; `aborted` when `should_stop` ended it early."""

    sample_rate: int
    num_samples: int = 0
    words: list[WordEvent] = field(default_factory=list)
    aborted: bool = False

    @property
    def duration_s(self) -> float:
        return self.num_samples / self.sample_rate if self.sample_rate else 0.0


ChunkCallback = Callable[[SynthesisChunk], None]
StopCheck = Callable[[], bool]


def _never_stop() -> bool:
    return False


def clamp_words_per_minute(words_per_minute: float) -> int:
    return int(min(MAX_WORDS_PER_MINUTE, max(MIN_WORDS_PER_MINUTE, round(words_per_minute))))


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the whitespace-separated words of `text`."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for index, char in enumerate(text):
        if char.isspace():
            if start is not None:
                spans.append((start, index))
                start = None
        elif start is None:
            start = index
    if start is not None:
        spans.append((start, len(text)))
    return spans


class _WordLocator:
    """Maps eSpeak word events back to the words of the input text.

    eSpeak reports its own tokens ("3:30" is two, "I'd" reports as "I"); the
    caller wants the words as written, once each, so events are mapped to the
    whitespace-separated word that contains them.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._spans = word_spans(text)
        self._next = 0

    def locate(self, text_position: int) -> tuple[str, int] | None:
        offset = text_position - 1
        while self._next < len(self._spans):
            start, end = self._spans[self._next]
            if offset < start:
                return None  # falls in whitespace before the next word
            self._next += 1
            if offset < end:
                return self._text[start:end], start
        return None


@dataclass
class _Job:
    """State of the synthesis running on the engine thread."""

    locator: _WordLocator
    sample_rate: int
    on_chunk: ChunkCallback
    should_stop: StopCheck
    result: SynthesisResult
    error: BaseException | None = None


def _load_library(library_path: str, data_path: str) -> tuple[ctypes.CDLL, int]:
    """Bind the C API and initialise it for synchronous (callback) output."""
    lib = ctypes.CDLL(library_path)
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
        ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p,
    ]
    lib.espeak_Synth.restype = ctypes.c_int
    lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
    lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
    rate = lib.espeak_Initialize(
        _AUDIO_OUTPUT_SYNCHRONOUS, BUFFER_MS, data_path.encode(), _INITIALIZE_DONT_EXIT
    )
    if rate <= 0:
        raise EspeakError(f"espeak_Initialize failed ({rate})")
    lib.espeak_SetParameter(_PARAM_PITCH, DEFAULT_PITCH, 0)
    return lib, rate


class EspeakEngine:
    """Drives eSpeak NG from one dedicated thread; use `shared()` unless testing."""

    _shared: ClassVar[EspeakEngine | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()
    # libespeak-ng is one global state per process, whichever engine drives it.
    _library: ClassVar[tuple[ctypes.CDLL, int] | None] = None
    _library_lock: ClassVar[threading.RLock] = threading.RLock()
    _library_owner: ClassVar[EspeakEngine | None] = None

    def __init__(self, library_path: str | None = None, data_path: str | None = None) -> None:
        self._library_path = library_path or espeakng_loader.get_library_path()
        self._data_path = data_path or espeakng_loader.get_data_path()
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="espeak", initializer=self._note_thread
        )
        self._thread_id: int | None = None
        self._sample_rate = 0
        self._voice: str | None = None
        self._rate: int | None = None
        self._shape: VoiceShape | None = None
        self._job: _Job | None = None
        self._callback = _SynthCallback(self._on_synth)  # kept alive for the library

    @classmethod
    def shared(cls) -> EspeakEngine:
        """The process-wide engine: the library is a global singleton anyway."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    @property
    def native_sample_rate(self) -> int:
        """eSpeak's output rate (22050 Hz for the bundled voices); initialises lazily."""
        if not self._sample_rate:
            self._run(self._initialise).result()
        return self._sample_rate

    # -- public API -----------------------------------------------------------

    def start_synthesis(
        self,
        text: str,
        *,
        voice: str = DEFAULT_VOICE,
        words_per_minute: float = DEFAULT_WORDS_PER_MINUTE,
        shape: VoiceShape = VoiceShape(),
        on_chunk: ChunkCallback,
        should_stop: StopCheck = _never_stop,
    ) -> Future[SynthesisResult]:
        """Queue a synthesis on the engine thread; `on_chunk` is called on that thread."""
        return self._run(
            self._synthesize_locked, text, voice, clamp_words_per_minute(words_per_minute),
            shape.clamped(), on_chunk, should_stop,
        )

    def synthesize(
        self,
        text: str,
        *,
        voice: str = DEFAULT_VOICE,
        words_per_minute: float = DEFAULT_WORDS_PER_MINUTE,
        shape: VoiceShape = VoiceShape(),
        on_chunk: ChunkCallback,
        should_stop: StopCheck = _never_stop,
    ) -> SynthesisResult:
        """Synthesize `text`, streaming chunks to `on_chunk`; blocks until done or stopped."""
        return self.start_synthesis(
            text, voice=voice, words_per_minute=words_per_minute, shape=shape,
            on_chunk=on_chunk, should_stop=should_stop,
        ).result()

    def phonemes(self, text: str, voice: str = DEFAULT_VOICE, *, separator: str = "_") -> str:
        """eSpeak's ASCII phoneme mnemonics for `text` (clauses joined by spaces).

        Phonemes within a word are joined by `separator` ("" gives eSpeak's
        compact form); stress marks (' and ,) stay attached to their phoneme.
        """
        return self._run(self._phonemes_locked, text, voice, separator).result()

    # -- engine thread ----------------------------------------------------------

    def _note_thread(self) -> None:
        self._thread_id = threading.get_ident()

    def _run(self, fn: Callable, *args: object) -> Future:
        if threading.get_ident() == self._thread_id:
            future: Future = Future()  # already on the engine thread: run inline
            try:
                future.set_result(fn(*args))
            except BaseException as error:  # noqa: BLE001 - handed to the caller
                future.set_exception(error)
            return future
        return self._executor.submit(fn, *args)

    def _claim_library(self) -> ctypes.CDLL:
        """The process's libespeak-ng, initialised once, with this engine's callback.

        Called with the library lock held: the C state is one per process, so an
        engine that did not drive it last re-installs its callback and forgets the
        voice and rate it thinks are set.
        """
        cls = EspeakEngine
        if cls._library is None:
            cls._library = _load_library(self._library_path, self._data_path)
            logger.debug(f"eSpeak NG initialised at {cls._library[1]} Hz")
        lib, self._sample_rate = cls._library
        if cls._library_owner is not self:
            lib.espeak_SetSynthCallback(self._callback)
            self._voice = None
            self._rate = None
            self._shape = None
            cls._library_owner = self
        return lib

    def _initialise(self) -> None:
        with self._library_lock:
            self._claim_library()

    def _select_voice(self, lib: ctypes.CDLL, voice: str) -> None:
        if voice == self._voice:
            return
        self._voice = None
        self._shape = None  # a new voice brings its own pitch: set ours again
        if lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
            raise EspeakError(f"eSpeak has no voice named {voice!r}")
        self._voice = voice

    def _synthesize_locked(
        self, text: str, voice: str, rate: int, shape: VoiceShape, on_chunk: ChunkCallback,
        should_stop: StopCheck,
    ) -> SynthesisResult:
        data = text.encode("utf-8")
        with self._library_lock:
            lib = self._claim_library()
            result = SynthesisResult(sample_rate=self._sample_rate)
            if not text.strip():
                return result
            self._select_voice(lib, voice)
            if rate != self._rate:
                lib.espeak_SetParameter(_PARAM_RATE, rate, 0)
                self._rate = rate
            if shape != self._shape:
                lib.espeak_SetParameter(_PARAM_PITCH, shape.pitch, 0)
                lib.espeak_SetParameter(_PARAM_RANGE, shape.range, 0)
                lib.espeak_SetParameter(_PARAM_VOLUME, shape.volume, 0)
                self._shape = shape
            self._job = _Job(_WordLocator(text), self._sample_rate, on_chunk, should_stop, result)
            try:
                status = lib.espeak_Synth(
                    data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8 | _ENDPAUSE, None, None
                )
                job = self._job
            finally:
                self._job = None
        if job.error is not None:
            raise job.error
        if status != _EE_OK and not result.aborted:
            raise EspeakError(f"espeak_Synth failed ({status})")
        return result

    def _on_synth(self, wav, num_samples: int, events) -> int:
        """Called by eSpeak for every buffer; returning 1 aborts the synthesis."""
        job = self._job
        if job is None:
            return 1
        try:
            words = self._collect_words(job, events)
            if job.should_stop():
                job.result.aborted = True
                return 1
            audio = ctypes.string_at(wav, num_samples * 2) if wav and num_samples > 0 else b""
            job.result.num_samples += num_samples if audio else 0
            if audio or words:
                job.on_chunk(SynthesisChunk(audio, words))
            return 0
        except BaseException as error:  # noqa: BLE001 - re-raised after espeak_Synth returns
            job.error = error
            job.result.aborted = True
            return 1

    @staticmethod
    def _collect_words(job: _Job, events) -> tuple[WordEvent, ...]:
        words: list[WordEvent] = []
        index = 0
        while events and events[index].type != _EVENT_LIST_TERMINATED:
            event = events[index]
            index += 1
            if event.type != _EVENT_WORD:
                continue
            located = job.locator.locate(event.text_position)
            if located is None:
                continue
            word, offset = located
            start_s = (
                event.sample / job.sample_rate if event.sample > 0 else event.audio_position / 1000
            )
            words.append(WordEvent(word=word, start_s=start_s, char_offset=offset))
        job.result.words.extend(words)
        return tuple(words)

    def _phonemes_locked(self, text: str, voice: str, separator: str) -> str:
        if not text.strip():
            return ""
        mode = (ord(separator) << 8) if separator else 0
        buffer = ctypes.create_string_buffer(text.encode("utf-8"))
        pointer = ctypes.c_void_p(ctypes.addressof(buffer))
        clauses: list[str] = []
        with self._library_lock:
            lib = self._claim_library()
            self._select_voice(lib, voice)
            while pointer.value:
                phonemes = lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, mode)
                if phonemes:
                    clauses.append(phonemes.decode("utf-8", errors="replace").strip())
        return " ".join(clause for clause in clauses if clause)


def resample_pcm(pcm: bytes, in_rate: int, out_rate: int) -> bytes:
    """Whole-buffer PCM16 mono resampling (soxr, high quality)."""
    if in_rate == out_rate or not pcm:
        return pcm
    samples = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2")
    return soxr.resample(samples, in_rate, out_rate, quality="HQ").astype("<i2").tobytes()


def _render_lines(lines: list[tuple[str, dict]], sample_rate: int) -> list[bytes]:
    """Synthesize `lines` in order with this process's engine (runs in a fresh worker)."""
    engine = EspeakEngine.shared()
    rendered = []
    for text, voice in lines:
        chunks: list[SynthesisChunk] = []
        result = engine.start_synthesis(text, on_chunk=chunks.append, **voice).result()
        audio = [chunk.audio for chunk in chunks]
        rendered.append(resample_pcm(b"".join(audio), result.sample_rate, sample_rate))
    return rendered


async def synthesize_script(lines: Sequence[tuple[str, dict]], sample_rate: int) -> list[bytes]:
    """Each line as PCM16 mono at `sample_rate`, the same audio every time for the same lines.

    eSpeak's pitch flutter runs on from one utterance to the next in a static counter no
    call resets, so the same words come out a few samples different depending on all the
    process said before (and an offline recogniser may hear them differently). A fresh
    process starts the counter at zero: the lines are rendered there, in order (about a
    second to spawn). `voice` holds `synthesize_pcm`'s keyword arguments.
    """
    executor = spawn_executor(1)
    try:
        return await asyncio.wrap_future(
            executor.submit(_render_lines, [(text, dict(voice)) for text, voice in lines],
                            sample_rate)
        )
    finally:
        executor.shutdown(wait=False)


@dataclass(frozen=True)
class TimedSpeech:
    """A whole utterance (PCM16 mono) and eSpeak's word events: each word's start in
    seconds from the audio's start (resampling keeps the times)."""

    audio: bytes
    sample_rate: int
    words: tuple[WordEvent, ...]

    @property
    def duration_s(self) -> float:
        return len(self.audio) / 2 / self.sample_rate if self.sample_rate else 0.0


async def synthesize_timed(
    text: str,
    sample_rate: int,
    *,
    voice: str = DEFAULT_VOICE,
    words_per_minute: float = DEFAULT_WORDS_PER_MINUTE,
    shape: VoiceShape = VoiceShape(),
    engine: EspeakEngine | None = None,
) -> TimedSpeech:
    """The whole utterance at `sample_rate` with its word times (the same events the live
    `EspeakTTSService` times its words by), without blocking the loop."""
    engine = engine or EspeakEngine.shared()
    chunks: list[bytes] = []
    result = await asyncio.wrap_future(
        engine.start_synthesis(
            text, voice=voice, words_per_minute=words_per_minute, shape=shape,
            on_chunk=lambda chunk: chunks.append(chunk.audio),
        )
    )
    audio = resample_pcm(b"".join(chunks), result.sample_rate, sample_rate)
    return TimedSpeech(audio, sample_rate, tuple(result.words))


async def synthesize_pcm(
    text: str,
    sample_rate: int,
    *,
    voice: str = DEFAULT_VOICE,
    words_per_minute: float = DEFAULT_WORDS_PER_MINUTE,
    shape: VoiceShape = VoiceShape(),
    engine: EspeakEngine | None = None,
) -> bytes:
    """The whole utterance as PCM16 mono at `sample_rate`, without blocking the loop."""
    speech = await synthesize_timed(text, sample_rate, voice=voice,
                                    words_per_minute=words_per_minute, shape=shape,
                                    engine=engine)
    return speech.audio
