"""Stereo call recording: caller on the left channel, agent on the right.

The caller channel is fed where the caller's audio ends, right after turn detection
(`processors/voice/caller_audio_end_processor.py`), the agent channel by a tap
after the transport output (so it holds what was actually played, interruptions
included). The caller's audio arrives continuously at
real time, so it is the clock: agent audio is placed where the caller channel
is when it plays, with silence before it. Caller audio therefore never has to
travel the rest of the pipeline just to be recorded.

The WAV is written once, at the end of the call, in a worker thread so the
event loop never blocks on disk; its path goes into the call record.
"""

from __future__ import annotations

import asyncio
import wave
from pathlib import Path

import numpy as np
from loguru import logger

from call.call_session import CallSession
from lib.private_files import open_private, private_dir
from services.espeak.engine import resample_pcm

CHANNELS = 2


def write_wav(path: Path, audio: bytes, sample_rate: int, channels: int) -> None:
    """Write interleaved PCM16 as a WAV file, atomically (temp file + rename), readable by
    this user only (0600 in a 0700 folder: a recording is PHI)."""
    private_dir(path.parent)
    partial = path.with_suffix(".wav.partial")
    with open_private(partial) as file, wave.open(file, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(audio)
    partial.replace(path)


def interleave(left: bytes, right: bytes) -> bytes:
    """Two PCM16 mono tracks as one stereo track, the shorter padded with silence."""
    samples = max(len(left), len(right)) // 2
    stereo = np.zeros((samples, CHANNELS), dtype="<i2")
    stereo[: len(left) // 2, 0] = np.frombuffer(left[: len(left) & ~1], dtype="<i2")
    stereo[: len(right) // 2, 1] = np.frombuffer(right[: len(right) & ~1], dtype="<i2")
    return stereo.tobytes()


class StereoRecording:
    """Both sides of one call, aligned on the caller's audio clock, saved as one WAV."""

    def __init__(self, session: CallSession, directory: Path, sample_rate: int) -> None:
        self._session = session
        self.path = directory / f"{session.call_id}.wav"
        self.sample_rate = sample_rate
        self._caller = bytearray()
        self._agent = bytearray()
        self._saved = False

    def add_caller_audio(self, pcm: bytes, sample_rate: int) -> None:
        self._caller += resample_pcm(pcm, sample_rate, self.sample_rate)

    def add_agent_audio(self, pcm: bytes, sample_rate: int) -> None:
        """Agent audio as it plays: after any silence since the agent last spoke."""
        if len(self._agent) < len(self._caller):
            self._agent += bytes(len(self._caller) - len(self._agent))
        self._agent += resample_pcm(pcm, sample_rate, self.sample_rate)

    @property
    def seconds(self) -> float:
        return max(len(self._caller), len(self._agent)) / 2 / self.sample_rate

    async def save(self) -> bool:
        """Write the WAV once (no audio at all: nothing to write); record where it went."""
        if self._saved or not (self._caller or self._agent):
            return False
        self._saved = True
        seconds = round(self.seconds, 2)
        audio = interleave(bytes(self._caller), bytes(self._agent))
        try:
            await asyncio.to_thread(write_wav, self.path, audio, self.sample_rate, CHANNELS)
        except OSError as error:
            logger.error(f"call {self._session.call_id}: recording not saved: {error}")
            self._session.log.event("recording_failed", error=type(error).__name__)
            return False
        self._session.log.update_call(recording_path=str(self.path))
        self._session.log.event("recording_saved", seconds=seconds)
        return True
