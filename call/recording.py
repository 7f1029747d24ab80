"""Stereo call recording: caller on the left channel, agent on the right.

The caller channel is fed where the caller's audio ends, right after turn detection
(`processors/voice/caller_audio_end_processor.py`), the agent channel by a tap
after the transport output (so it holds what was actually played, interruptions
included). The caller's audio arrives continuously at
real time, so it is the clock: agent audio is placed where the caller channel
is when it plays, with silence before it. Caller audio therefore never has to
travel the rest of the pipeline just to be recorded.

The WAV grows on disk as the call goes on (`call/wav_file.GrowingWav`): every
`FLUSH_EVERY_S` of caller audio, the frames no later audio can change (those before
the caller's clock) are appended in a worker thread, so the event loop never blocks on
disk and a process killed mid-call leaves all but the last second for the next start to
salvage. At the end the rest is appended, the header finished, and the path goes into
the call record. If the disk refuses a chunk, the whole WAV is written at the end
instead, as one file.
"""

from __future__ import annotations

import asyncio
import wave
from pathlib import Path

import numpy as np
from loguru import logger

from call.call_session import CallSession
from call.wav_file import GrowingWav
from lib.private_files import open_private, private_dir
from services.espeak.engine import resample_pcm

CHANNELS = 2
FLUSH_EVERY_S = 1.0


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

    def __init__(self, session: CallSession, directory: Path, sample_rate: int, *,
                 flush_every_s: float = FLUSH_EVERY_S) -> None:
        self._session = session
        self.path = directory / f"{session.call_id}.wav"
        self.sample_rate = sample_rate
        self._caller = bytearray()
        self._agent = bytearray()
        self._saved = False
        self._file = GrowingWav(self.path, sample_rate, CHANNELS)
        self._flush_frames = max(1, int(flush_every_s * sample_rate))
        self._written = 0  # frames on disk
        self._writing: asyncio.Future | None = None
        self._stream_failed = False

    def add_caller_audio(self, pcm: bytes, sample_rate: int) -> None:
        self._caller += resample_pcm(pcm, sample_rate, self.sample_rate)
        self._write_soon()

    def add_agent_audio(self, pcm: bytes, sample_rate: int) -> None:
        """Agent audio as it plays: after any silence since the agent last spoke."""
        if len(self._agent) < len(self._caller):
            self._agent += bytes(len(self._caller) - len(self._agent))
        self._agent += resample_pcm(pcm, sample_rate, self.sample_rate)

    @property
    def seconds(self) -> float:
        return max(len(self._caller), len(self._agent)) / 2 / self.sample_rate

    def _stereo(self, start: int, end: int | None = None) -> bytes:
        """Frames [start, end) of both channels, interleaved (to the end when None)."""
        stop = None if end is None else end * 2
        return interleave(bytes(self._caller[start * 2:stop]), bytes(self._agent[start * 2:stop]))

    def _write_soon(self) -> None:
        """Append what is final (both channels before the caller's clock: agent audio is
        only ever placed at or after it) once a flush's worth has gathered."""
        if self._writing is not None or self._stream_failed or self._saved:
            return
        ready = len(self._caller) // 2
        if ready - self._written < self._flush_frames:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a synchronous caller): everything is written at the end
        chunk = self._stereo(self._written, ready)
        self._written = ready
        self._writing = loop.run_in_executor(None, self._file.append, chunk)
        self._writing.add_done_callback(self._written_through)

    def _written_through(self, done: asyncio.Future) -> None:
        self._writing = None
        error = None if done.cancelled() else done.exception()
        if done.cancelled() or error is not None:
            self._stream_failed = True
            name = type(error).__name__ if error is not None else "CancelledError"
            logger.error(f"call {self._session.call_id}: recording not written as it goes "
                         f"({name}); writing it at the end")
            self._session.log.event("recording_stream_failed", error=name)

    async def save(self) -> bool:
        """Finish the WAV once (no audio at all: nothing to write); record where it went."""
        if self._saved or not (self._caller or self._agent):
            return False
        self._saved = True
        seconds = round(self.seconds, 2)
        if self._writing is not None:
            await asyncio.wait([self._writing])
        try:
            if self._stream_failed:
                self._file.abandon()
                audio = interleave(bytes(self._caller), bytes(self._agent))
                await asyncio.to_thread(write_wav, self.path, audio, self.sample_rate, CHANNELS)
            else:
                await asyncio.to_thread(self._finish, self._stereo(self._written))
        except OSError as error:
            logger.error(f"call {self._session.call_id}: recording not saved: {error}")
            self._session.log.event("recording_failed", error=type(error).__name__)
            return False
        self._session.log.update_call(recording_path=str(self.path))
        self._session.log.event("recording_saved", seconds=seconds)
        return True

    def _finish(self, rest: bytes) -> None:
        if rest:
            self._file.append(rest)
        self._file.finish()
