"""Synthetic stereo recordings for the recordings tests: a tone on one side only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from call.recording import interleave, write_wav

RATE = 8000


def tone(seconds: float, hz: float = 440.0, amplitude: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype("<i2")


def caller_tone_recording(path: Path, *, silence_s: float = 1.0, tone_s: float = 1.0) -> Path:
    """`silence_s` of silence, then `tone_s` of tone on the caller (left) side, then
    `silence_s` more; the agent (right) side stays silent throughout."""
    quiet = np.zeros(int(silence_s * RATE), dtype="<i2")
    left = np.concatenate([quiet, tone(tone_s), quiet])
    write_wav(path, interleave(left.tobytes(), b""), RATE, 2)
    return path
