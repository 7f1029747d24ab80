"""Offline prosody: how activated the caller sounds, from the signal alone (numpy only).

Per 2 s segment of caller audio: loudness (dBFS of the speech frames), pitch (median
F0 from normalised autocorrelation, 75–400 Hz), pitch variability (half the 16–84th
percentile range, in semitones), and
speaking rate (syllable nuclei: peaks of the smoothed energy envelope per second of
speech). Arousal rises with all four — the robust finding of the acoustic literature
(Eyben et al. 2016, GeMAPS, IEEE Trans. Affective Computing) — while valence is only
weakly recoverable from acoustics, so this analyzer claims arousal and nothing else: no
emotion label, no valence (`valence_measured=False`). The emotional state takes which
emotion it is, and how pleasant, from the caller's words. Silence (too little speech)
gives no reading.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lib.worker_processes import LazyProcessPool, ProcessWide
from services.emotion.reading import EmotionReading, Source

FRAME_S = 0.040  # three periods of a 75 Hz voice
HOP_S = 0.010
MIN_SPEECH_FRAMES = 15  # 150 ms of speech in the segment
SPEECH_DB_FLOOR = -45.0
SPEECH_DB_BELOW_PEAK = 30.0
F0_MIN, F0_MAX = 75.0, 400.0
VOICED_CORRELATION = 0.45

# Feature → 0..1 before weighting (typical telephone speech ranges).
LOUDNESS_DB = (-40.0, -10.0)
PITCH_HZ = (80.0, 300.0)
PITCH_SPREAD_ST = (0.0, 3.0)
SYLLABLES_PER_S = (2.0, 7.0)
WEIGHTS = {"loudness": 0.3, "pitch": 0.3, "pitch_spread": 0.15, "rate": 0.25}


@dataclass(frozen=True)
class ProsodyFeatures:
    speech_s: float
    loudness_db: float
    pitch_hz: float | None
    pitch_spread_st: float
    syllables_per_s: float

    @property
    def arousal(self) -> float:
        parts = {
            "loudness": _scale(self.loudness_db, LOUDNESS_DB),
            "pitch": (_scale(math.log2(self.pitch_hz), tuple(map(math.log2, PITCH_HZ)))
                      if self.pitch_hz else 0.5),
            "pitch_spread": _scale(self.pitch_spread_st, PITCH_SPREAD_ST),
            "rate": _scale(self.syllables_per_s, SYLLABLES_PER_S),
        }
        return round(sum(WEIGHTS[name] * value for name, value in parts.items()), 4)


def _scale(value: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return min(1.0, max(0.0, (value - low) / (high - low)))


def _frames(x: np.ndarray, size: int, hop: int) -> np.ndarray:
    count = 1 + (len(x) - size) // hop
    index = np.arange(size)[None, :] + hop * np.arange(count)[:, None]
    return x[index]


def prosody_features(pcm: bytes, sample_rate: int) -> ProsodyFeatures | None:
    """The segment's features, or None when it holds too little speech."""
    x = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2").astype(np.float32) / 32768.0
    size, hop = int(FRAME_S * sample_rate), int(HOP_S * sample_rate)
    if len(x) < size + hop:
        return None
    frames = _frames(x, size, hop)
    db = 10 * np.log10(np.mean(frames * frames, axis=1) + 1e-10)
    speech = db > max(SPEECH_DB_FLOOR, float(db.max()) - SPEECH_DB_BELOW_PEAK)
    if int(speech.sum()) < MIN_SPEECH_FRAMES:
        return None
    window = np.hanning(size).astype(np.float32)
    # Normalised autocorrelation of every speech frame at once (zero-padded FFT),
    # divided by the window's own autocorrelation (Boersma 1993) so long lags — low
    # voices — are not penalised.
    spectrum = np.fft.rfft(frames[speech] * window[None, :], n=2 * size, axis=1)
    correlation = np.fft.irfft(np.abs(spectrum) ** 2, axis=1)[:, :size]
    own = np.fft.irfft(np.abs(np.fft.rfft(window, n=2 * size)) ** 2)[:size]
    correlation = correlation / (correlation[:, :1] + 1e-10) / (own / own[0])[None, :]
    low, high = int(sample_rate / F0_MAX), min(size - 1, int(sample_rate / F0_MIN))
    lags = np.argmax(correlation[:, low:high], axis=1) + low
    peaks = correlation[np.arange(len(lags)), lags]
    f0 = sample_rate / lags[peaks > VOICED_CORRELATION]
    pitch = spread = None
    if len(f0) >= 3:
        pitch = float(np.median(f0))
        semitones = 12 * np.log2(f0 / pitch)  # robust spread: octave errors do not count
        spread = float(np.percentile(semitones, 84) - np.percentile(semitones, 16)) / 2
    # Syllable nuclei: local maxima of the smoothed speech envelope, 3 dB prominent,
    # at least 100 ms apart.
    envelope = np.convolve(db, np.ones(7) / 7, mode="same")
    is_peak = ((envelope[1:-1] > envelope[:-2]) & (envelope[1:-1] >= envelope[2:])
               & speech[1:-1] & (envelope[1:-1] > float(np.median(envelope[speech])) - 3))
    nuclei, last = 0, -10
    for index in np.flatnonzero(is_peak) + 1:
        window = envelope[max(0, index - 8): index + 9]
        if index - last >= 10 and envelope[index] - float(window.min()) >= 3.0:
            nuclei, last = nuclei + 1, index
    speech_s = float(speech.sum()) * HOP_S
    return ProsodyFeatures(
        speech_s=round(speech_s, 3), loudness_db=round(float(db[speech].mean()), 2),
        pitch_hz=round(pitch, 1) if pitch else None, pitch_spread_st=round(spread or 0.0, 3),
        syllables_per_s=round(nuclei / speech_s, 3),
    )


def may_hold_speech(pcm: bytes, sample_rate: int) -> bool:
    """Whether any 40 ms of the segment is loud enough to be speech (`prosody_features`'
    own floor): a caller is silent for much of a call, and a silent segment is not worth
    sending to the analyzer's process. Tens of microseconds, on the event loop."""
    size = int(FRAME_S * sample_rate)
    x = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2")
    usable = len(x) // size * size
    if usable == 0:
        return False
    frames = x[:usable].astype(np.float32).reshape(-1, size) / 32768.0
    loudest = float(np.max(np.mean(frames * frames, axis=1)))
    return 10 * math.log10(loudest + 1e-10) > SPEECH_DB_FLOOR


def segment_arousal(pcm: bytes, sample_rate: int) -> float | None:
    """The segment's arousal, or None when it holds too little speech (runs in the pool)."""
    features = prosody_features(pcm, sample_rate)
    return features.arousal if features is not None else None


class ProsodyPool(ProcessWide):
    """The analyzer in a worker process of its own, shared by every call of this process.

    Not a thread: numpy gives up the GIL for each array operation and takes it back after
    the event loop's switch interval, so analyses in threads made the loop wait a moment,
    many times a second, and cost a busy process most of its calls (docs/PERFORMANCE.md).
    In a process the loop only hands over 2 s of audio (32 KB at 8 kHz) and reads back a
    number. One worker: the whole analysis is ~2-4 ms of CPU per call every 2 s.
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self._pool = LazyProcessPool(workers, "prosody analyzer")

    async def arousal(self, pcm: bytes, sample_rate: int) -> float | None:
        """A dead worker raises BrokenProcessPool once; the next segment starts another."""
        return await self._pool.run(segment_arousal, pcm, sample_rate)

    async def warm_up(self) -> None:
        """Spawn the worker (about a second: interpreter, numpy) before the first call."""
        await self.arousal(bytes(3200), 8000)

    def shutdown(self) -> None:
        """Stop the worker (service shutdown, tests); the next segment would start another."""
        self._pool.shutdown()


class LocalAudioProvider:
    """Signal prosody in the shared analyzer process (`ProsodyPool`): how activated the
    caller sounds, nothing more."""

    name = "local"

    def __init__(self, pool: ProsodyPool | None = None) -> None:
        self._pool = pool or ProsodyPool.shared()

    async def connect(self) -> None:
        return None

    async def analyze(self, pcm: bytes, sample_rate: int, *, at: float) -> list[EmotionReading]:
        if not may_hold_speech(pcm, sample_rate):
            return []  # silence: nothing to hear, and no trip to the analyzer
        arousal = await self._pool.arousal(pcm, sample_rate)
        if arousal is None:
            return []
        return [EmotionReading(Source.PROSODY, {}, at, provider=self.name,
                               valence_measured=False, arousal=arousal)]

    async def close(self) -> None:
        return None
