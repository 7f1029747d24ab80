"""Ground truth for a call's transcript: its recording re-transcribed by a batch model.

The real-time recognizer hears each caller turn once, in a hurry. Afterwards the
stereo recording can be heard whole by a more accurate model: Deepgram
pre-recorded (nova-3, one request, each channel transcribed on its own) when a
Deepgram key is configured, else the local recognizer on the recording's
utterances. The caller side of that transcript is the reference the real-time
caller transcript is scored against (1 - WER, `jiwer`, after normalising case and
punctuation).

The batch pass is told the clinic's whole vocabulary (runner/call_vocabulary.py: the
call's keyterms, its practitioners, appointment types, locations, and the medication and
carrier names on the workspace's charts): Deepgram as `keyterm` parameters, the local
recognizer as pronunciations added to its decoder the way the live one adds keyterms. So
it hears the clinic's names the live recognizer may have missed, and each such miss
becomes a proposed keyterm of the service (runner/keyterm_learning.py), once the
verification is stored.

Local decoding uses its own one-process decoder pool and one verification at a
time per process: a long recording never takes decoders from live calls.

Run on demand (`POST /api/calls/{id}/verify-transcript`) or, when the workspace's voice
settings turn `transcript_correction_enabled` on, after every recorded call
(`verify_after_call`, scheduled by `runner/call_runner.finish_call`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
import jiwer
import numpy as np
from loguru import logger

from analysis.keyterm_suggestions import VerifiedSpeech
from db.recording_files import channel_samples, read_wav
from db.repositories import as_uuid
from lib.worker_processes import ProcessWide
from runner.call_vocabulary import CallVocabulary, call_vocabulary
from runner.keyterm_learning import learn_after_verification
from services.pocketsphinx.stt import (
    TRIM_THRESHOLD,
    DecoderPool,
    KeytermLexicon,
    keyterm_spellings,
)

if TYPE_CHECKING:
    from call.call_session import CallLog
    from config import Settings

SPEAKERS = ("caller", "agent")  # channel 0, channel 1 (call/recording.py)
DEEPGRAM_BATCH_MODEL = "nova-3"
DEEPGRAM_DEFAULT_URL = "https://api.deepgram.com"
LOCAL_VERIFIER = "local:pocketsphinx"

# Utterances for the local recognizer: speech separated by at least this much quiet.
FRAME_S = 0.02
MIN_GAP_S = 0.4
SPAN_PAD_S = 0.15
MAX_SPAN_S = 20.0

_PUNCTUATION = re.compile(r"[^\w\s']+")
_APOSTROPHE = re.compile(r"'")


class VerificationError(Exception):
    """The batch model could not transcribe the recording (the API answers 502)."""


@dataclass(frozen=True)
class VerifiedWord:
    word: str
    start_ms: int
    end_ms: int
    speaker: str
    confidence: float | None = None


@dataclass(frozen=True)
class Verification:
    verifier: str
    words: list[VerifiedWord]

    def text(self, speaker: str) -> str:
        return " ".join(w.word for w in self.words if w.speaker == speaker)

    def caller_speech(self) -> list[VerifiedSpeech]:
        """The caller channel's words, as the keyterm suggestions read them."""
        return [VerifiedSpeech(w.word, w.start_ms, w.confidence)
                for w in self.words if w.speaker == "caller"]

    def transcript(self) -> str:
        """Both sides in time order, one line per stretch of one speaker."""
        lines: list[tuple[str, list[str]]] = []
        for word in sorted(self.words, key=lambda w: (w.start_ms, w.speaker)):
            if not lines or lines[-1][0] != word.speaker:
                lines.append((word.speaker, []))
            lines[-1][1].append(word.word)
        return "\n".join(f"{speaker}: {' '.join(words)}" for speaker, words in lines)


@dataclass(frozen=True)
class VerificationResult:
    call_id: str
    verifier: str
    accuracy: float
    wer: float
    words: int
    transcript: str
    suggested: int = 0  # keyterm suggestions this call proposed or strengthened


# --- Scoring -------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower case, punctuation out ("Tuesday, 3 p.m." -> "tuesday 3 pm"), single spaces."""
    text = _APOSTROPHE.sub("", _PUNCTUATION.sub(" ", text.lower().replace(".", "")))
    return " ".join(text.split())


def word_error_rate(reference: str, hypothesis: str) -> float:
    """WER of `hypothesis` against `reference`, both normalised. An empty reference
    scores 0 against an empty hypothesis and 1 against anything said."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return float(jiwer.wer(ref, hyp))


def accuracy_of(wer: float) -> float:
    return max(0.0, 1.0 - wer)


# --- Deepgram pre-recorded -----------------------------------------------------------


def deepgram_listen_url(base_url: str | None) -> str:
    """The REST `/v1/listen` URL for a Deepgram host setting (which may name the live
    WebSocket host: `wss://` is the same host over `https://`)."""
    base = (base_url or DEEPGRAM_DEFAULT_URL).rstrip("/")
    if "://" not in base:
        base = f"https://{base}"
    scheme, rest = base.split("://", 1)
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return f"{scheme}://{rest}/v1/listen"


def deepgram_params(keyterms: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The request's query: the model and features, then one `keyterm` per term."""
    return [("model", DEEPGRAM_BATCH_MODEL), ("smart_format", "true"), ("utterances", "true"),
            ("multichannel", "true"), *(("keyterm", term) for term in keyterms)]


def parse_deepgram_prerecorded(body: dict[str, Any]) -> list[VerifiedWord]:
    """Words of a multichannel pre-recorded response: channel 0 the caller, 1 the agent."""
    try:
        channels = body["results"]["channels"]
    except (KeyError, TypeError):
        raise VerificationError("Deepgram response has no results.channels") from None
    words: list[VerifiedWord] = []
    for index, channel in enumerate(channels[: len(SPEAKERS)]):
        alternatives = channel.get("alternatives") or []
        if not alternatives:
            continue
        for item in alternatives[0].get("words") or []:
            text = item.get("punctuated_word") or item.get("word")
            if not text or item.get("start") is None or item.get("end") is None:
                continue
            confidence = item.get("confidence")
            words.append(VerifiedWord(
                str(text), round(1000 * float(item["start"])), round(1000 * float(item["end"])),
                SPEAKERS[index], None if confidence is None else float(confidence)))
    return sorted(words, key=lambda w: (w.start_ms, w.speaker))


async def deepgram_verify(wav: bytes, *, api_key: str, base_url: str | None,
                          timeout_s: float, keyterms: Sequence[str] = ()) -> Verification:
    """One pre-recorded request with the whole stereo WAV (and keyterms to listen for)."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.post(
                deepgram_listen_url(base_url), params=deepgram_params(keyterms), content=wav,
                headers={"Authorization": f"Token {api_key}", "Content-Type": "audio/wav"},
            )
    except httpx.TimeoutException:
        raise TimeoutError("Deepgram did not answer in time") from None
    except httpx.HTTPError as error:
        raise VerificationError(f"Deepgram unreachable: {type(error).__name__}") from None
    if response.status_code != 200:
        raise VerificationError(f"Deepgram answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise VerificationError("Deepgram answered with something other than JSON") from None
    try:
        words = parse_deepgram_prerecorded(body)
    except (ValueError, TypeError, AttributeError) as error:
        raise VerificationError(f"Deepgram response not understood: {error}") from None
    return Verification(f"deepgram:{DEEPGRAM_BATCH_MODEL}", words)


# --- Local recognizer ----------------------------------------------------------------


def speech_spans(samples: np.ndarray, sample_rate: int) -> list[tuple[int, int]]:
    """[start, end) sample ranges of speech: loud 20 ms frames joined across gaps
    shorter than `MIN_GAP_S`, padded, and cut at `MAX_SPAN_S`."""
    frame = max(1, int(FRAME_S * sample_rate))
    count = len(samples) // frame
    if count == 0:
        return []
    peaks = np.abs(samples[: count * frame].astype(np.int32)).reshape(count, frame).max(axis=1)
    loud = np.flatnonzero(peaks > TRIM_THRESHOLD)
    if not len(loud):
        return []
    gap, pad = int(MIN_GAP_S / FRAME_S), int(SPAN_PAD_S * sample_rate)
    longest = int(MAX_SPAN_S * sample_rate)
    spans: list[tuple[int, int]] = []
    first = last = int(loud[0])
    for index in map(int, loud[1:]):
        if index - last > gap:
            spans.append((first, last))
            first = index
        last = index
    spans.append((first, last))
    cut: list[tuple[int, int]] = []
    for first, last in spans:
        start = max(0, first * frame - pad)
        end = min(len(samples), (last + 1) * frame + pad)
        cut.extend((s, min(end, s + longest)) for s in range(start, end, longest))
    return cut


_local_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


def _local_lock() -> asyncio.Lock:
    """One verification at a time on this loop (a lock is bound to the loop it waits on)."""
    loop = asyncio.get_running_loop()
    for other in [known for known in _local_locks if known.is_closed()]:
        del _local_locks[other]
    return _local_locks.setdefault(loop, asyncio.Lock())


class VerificationDecoder(ProcessWide):
    """The verification's own decoder process (live calls keep theirs), started on first
    use; listed by `ProcessWide.started` so `runtime.stop_worker_pools` stops it."""

    def __init__(self) -> None:
        self.pool = DecoderPool("scheduling", size=1)

    def shutdown(self) -> None:
        """Stop the worker; the next verification starts another."""
        self.pool.shutdown()


async def local_verify(recording: Path, keyterms: Sequence[str] = ()) -> Verification:
    """Each channel's utterances decoded by PocketSphinx, one verification at a time, with
    the keyterms' pronunciations added to its decoder (`KeytermLexicon`, as for a live
    call) and their spelling restored ("okafor" -> "Okafor")."""
    audio = await asyncio.to_thread(read_wav, recording)
    words: list[VerifiedWord] = []
    spellings = keyterm_spellings(keyterms)
    async with _local_lock():
        pool = VerificationDecoder.shared().pool
        pronunciations = await asyncio.to_thread(
            KeytermLexicon.pronunciations, keyterms, pool.vocabulary)
        for speaker in SPEAKERS:
            samples = channel_samples(audio, speaker)
            for start, end in speech_spans(samples, audio.sample_rate):
                pcm = samples[start:end].tobytes()
                try:
                    result = await pool.transcribe(pcm, audio.sample_rate, pronunciations)
                except Exception as error:  # a dead worker: the whole verification fails
                    raise VerificationError(
                        f"local recognizer failed: {type(error).__name__}") from None
                offset_ms = 1000 * start / audio.sample_rate
                words.extend(
                    VerifiedWord(spellings.get(w.word, w.word),
                                 round(offset_ms + 1000 * w.start_s),
                                 round(offset_ms + 1000 * w.end_s), speaker)
                    for w in result.words
                )
    words.sort(key=lambda w: (w.start_ms, w.speaker))
    return Verification(LOCAL_VERIFIER, words)


def shutdown_local_pool() -> None:
    """Stop the verification decoder (tests, shutdown); the next use starts a new one."""
    for decoder in VerificationDecoder.started():
        decoder.shutdown()


# --- One call ------------------------------------------------------------------------


async def realtime_caller_transcript(pool: asyncpg.Pool, call_id: str) -> str:
    rows = await pool.fetch(
        "SELECT text FROM turns WHERE call_id = $1 AND speaker_role = 'caller' ORDER BY seq",
        as_uuid(call_id))
    return " ".join(row["text"] for row in rows)


async def store_verification(pool: asyncpg.Pool, call_id: str, verification: Verification,
                             accuracy: float) -> None:
    """All five columns in one statement: a verification is stored whole or not at all."""
    await pool.execute(
        """UPDATE calls SET verified_transcript = $2, verified_words = $3,
                            transcript_accuracy = $4, transcript_verified_at = $5,
                            transcript_verifier = $6
           WHERE id = $1""",
        as_uuid(call_id), verification.transcript(),
        [asdict(word) for word in verification.words], accuracy, datetime.now(UTC),
        verification.verifier,
    )


async def vocabulary_of(db: asyncpg.Pool, call_id: str,
                        system_keyterms: Sequence[str]) -> CallVocabulary:
    """The call's vocabulary; the system keyterms alone when the database cannot say
    (the verification goes on hearing less)."""
    try:
        return await call_vocabulary(db, call_id, system_keyterms)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        logger.warning(f"call {call_id}: clinic vocabulary not read ({type(error).__name__})")
        return CallVocabulary(keyterms=tuple(system_keyterms), lexicon=tuple(system_keyterms))


async def verify_recording(
    db: asyncpg.Pool, call_id: str, recording: Path, *, deepgram_api_key: str | None,
    deepgram_base_url: str | None, timeout_s: float, system_keyterms: Sequence[str] = (),
) -> VerificationResult:
    """Re-transcribe with the clinic's vocabulary, score, store, then propose the words
    the live recognizer missed as keyterms (never failing the verification).
    TimeoutError past `timeout_s` (nothing stored), VerificationError when the model
    fails, FileNotFoundError without the WAV."""
    async with asyncio.timeout(timeout_s):
        vocabulary = await vocabulary_of(db, call_id, system_keyterms)
        if deepgram_api_key:
            wav = await asyncio.to_thread(recording.read_bytes)
            verification = await deepgram_verify(
                wav, api_key=deepgram_api_key, base_url=deepgram_base_url, timeout_s=timeout_s,
                keyterms=vocabulary.for_deepgram())
        else:
            verification = await local_verify(recording, vocabulary.lexicon)
        realtime = await realtime_caller_transcript(db, call_id)
        wer = word_error_rate(verification.text("caller"), realtime)
        accuracy = accuracy_of(wer)
        await store_verification(db, call_id, verification, accuracy)
    logger.info(f"call {call_id}: transcript verified by {verification.verifier}, "
                f"{len(verification.words)} words, accuracy {accuracy:.3f}")
    suggested = await learn_after_verification(db, call_id, verification.caller_speech(),
                                               vocabulary)
    return VerificationResult(call_id, verification.verifier, round(accuracy, 4), round(wer, 4),
                              len(verification.words), verification.transcript(), suggested)


def verifier_options(settings: Settings) -> dict[str, Any]:
    """`verify_recording`'s model, bound and the deployment's keyterms under these
    settings (Deepgram with a key)."""
    key = settings.providers.deepgram_api_key
    return {"deepgram_api_key": key.get_secret_value() if key is not None else None,
            "deepgram_base_url": settings.providers.deepgram_base_url,
            "timeout_s": settings.server.transcript_verify_timeout_s,
            "system_keyterms": tuple(settings.call.system_keyterms)}


async def verify_after_call(db: asyncpg.Pool, log: CallLog, recording: Path,
                            settings: Settings) -> VerificationResult | None:
    """A finished call's automatic re-transcription. Never raises, bounded by
    `TRANSCRIPT_VERIFY_TIMEOUT_S`; the outcome is an event on the call
    (`transcript_verified` or `transcript_verification_failed`). A failure's log line
    names the error type alone: a model's message could quote the caller."""
    options = verifier_options(settings)
    try:
        async with asyncio.timeout(options["timeout_s"]):
            result = await verify_recording(db, log.call_id, recording, **options)
    except Exception as error:  # noqa: BLE001 - the call is over; re-runnable from the API
        logger.warning(f"call {log.call_id}: automatic transcript verification failed "
                       f"({type(error).__name__})")
        log.event("transcript_verification_failed", automatic=True,
                  error=type(error).__name__)
        return None
    log.event("transcript_verified", automatic=True, verifier=result.verifier,
              accuracy=result.accuracy, wer=result.wer, words=result.words)
    return result
