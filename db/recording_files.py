"""A call's stereo WAV as the HTTP API serves it: byte ranges, one channel, an envelope.

Plain functions on paths and bytes so they are tested without a server. The
recording layout is `call/recording.py`'s: PCM16, caller left (channel 0),
agent right (channel 1).

A single channel is extracted once and cached beside the recording
(`<call_id>.caller.wav`, `<call_id>.agent.wav`): a player seeking through a call
sends many range requests, and each would otherwise re-read and re-split the
whole stereo file (a 10-minute 8 kHz call: 18.75 MiB, 27 ms to split and write;
a cache hit is one stat, ~0.01 ms). The waveform is computed per request (23 ms for
10 minutes at 800 points), in a worker thread like every disk read here.
"""

from __future__ import annotations

import io
import os
import re
import stat
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from loguru import logger

from lib.private_files import write_private

Channel = Literal["caller", "agent"]
CHANNEL_INDEX: dict[str, int] = {"caller": 0, "agent": 1}
CHUNK_BYTES = 64 * 1024
MAX_WAVEFORM_POINTS = 4000

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)
# A position with more significant digits than this is past the end of any file; the
# parser never turns thousands of digits into an int (Python refuses past 4300 anyway).
MAX_POSITION_DIGITS = 18
PAST_ANY_FILE = 10**MAX_POSITION_DIGITS


class RangeNotSatisfiable(Exception):
    """A well-formed range none of whose bytes exist (416, `Content-Range: bytes */size`)."""


@dataclass(frozen=True)
class ByteRange:
    """Inclusive byte positions, as `Content-Range` states them."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The one byte range a `Range` header asks for, clipped to the file.

    None means "send the whole file" (200): no header, a unit other than bytes, a
    malformed value, or several ranges (RFC 9110 lets a server ignore Range; one
    range is all a media player asks for). Raises RangeNotSatisfiable when the range
    is well formed but starts past the end (or asks for a zero-length suffix).
    """
    if not header:
        return None
    match = _RANGE.match(header)
    if match is None:
        return None
    first, last = match.group(1), match.group(2)
    if not first and not last:
        return None
    if not first:  # bytes=-n: the last n bytes
        suffix = _position(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable
        return ByteRange(max(0, size - suffix), size - 1)
    start = _position(first)
    end = _position(last) if last else size - 1
    if last and end < start:
        return None  # invalid: ignored, not unsatisfiable
    if start >= size:
        raise RangeNotSatisfiable
    return ByteRange(start, min(end, size - 1))


def _position(digits: str) -> int:
    """A byte position as written; one too long for any file counts as past every end."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= MAX_POSITION_DIGITS else PAST_ANY_FILE


def iter_file(path: Path, start: int, length: int) -> Iterator[bytes]:
    """`length` bytes of `path` from `start`, in chunks (a sync iterator: Starlette runs
    it in its thread pool, so the event loop never reads the disk)."""
    with path.open("rb") as file:
        file.seek(start)
        remaining = length
        while remaining > 0:
            chunk = file.read(min(CHUNK_BYTES, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk


@dataclass(frozen=True)
class WavAudio:
    """PCM16 samples, shape (frames, channels)."""

    sample_rate: int
    samples: np.ndarray

    @property
    def duration_ms(self) -> int:
        return int(round(1000 * len(self.samples) / self.sample_rate)) if self.sample_rate else 0


def read_wav(path: Path) -> WavAudio:
    """A PCM16 WAV's samples (ValueError for anything else)."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError("recording is not 16-bit PCM")
        channels, rate = wav.getnchannels(), wav.getframerate()
        data = wav.readframes(wav.getnframes())
    samples = np.frombuffer(data, dtype="<i2")
    return WavAudio(rate, samples[: len(samples) - len(samples) % channels].reshape(-1, channels))


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """Mono PCM16 samples as a complete WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(np.ascontiguousarray(samples, dtype="<i2").tobytes())
    return buffer.getvalue()


def channel_samples(audio: WavAudio, channel: Channel) -> np.ndarray:
    """One side of the call (a mono file stands for both sides)."""
    index = CHANNEL_INDEX[channel]
    return audio.samples[:, min(index, audio.samples.shape[1] - 1)]


def channel_path(recording: Path, channel: Channel) -> Path:
    return recording.with_name(f"{recording.stem}.{channel}.wav")


def channel_wav(recording: Path, channel: Channel) -> Path | bytes:
    """The mono WAV of one channel: the cached file, made now if missing or stale.

    If the cache cannot be written (read-only recordings directory), the WAV's bytes.
    Runs in a worker thread (disk and numpy work).
    """
    cached = channel_path(recording, channel)
    try:
        found = cached.stat()
        if stat.S_ISREG(found.st_mode) and found.st_mtime_ns >= recording.stat().st_mtime_ns:
            return cached
    except FileNotFoundError:
        pass
    audio = read_wav(recording)
    data = wav_bytes(channel_samples(audio, channel), audio.sample_rate)
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
    try:
        write_private(partial, data)  # PHI, as the recording it comes from
        partial.replace(cached)  # atomic: a concurrent reader sees the old file or the new
    except OSError as error:
        logger.warning(f"channel cache not written ({type(error).__name__}); serving from memory")
        partial.unlink(missing_ok=True)
        return data
    return cached


def peaks(samples: np.ndarray, points: int) -> list[float]:
    """Peak |amplitude| (0..1) in each of `points` equal slices of the samples."""
    if points <= 0:
        return []
    if len(samples) == 0:
        return [0.0] * points
    edges = np.linspace(0, len(samples), points + 1).astype(np.int64)
    magnitude = np.abs(samples.astype(np.int32))
    starts = np.minimum(edges[:-1], len(samples) - 1)
    values = np.maximum.reduceat(magnitude, starts).astype(np.float64) / 32768.0
    values[edges[1:] <= edges[:-1]] = 0.0  # empty slices (fewer samples than points)
    return [round(float(v), 4) for v in np.clip(values, 0.0, 1.0)]


@dataclass(frozen=True)
class Waveform:
    sample_rate: int
    duration_ms: int
    points: int
    caller: list[float]
    agent: list[float]


def waveform(recording: Path, points: int) -> Waveform:
    """Both channels' amplitude envelopes over the same `points` time slices."""
    audio = read_wav(recording)
    return Waveform(
        sample_rate=audio.sample_rate,
        duration_ms=audio.duration_ms,
        points=points,
        caller=peaks(channel_samples(audio, "caller"), points),
        agent=peaks(channel_samples(audio, "agent"), points),
    )
