"""Stereo call recording: caller on the left channel, agent on the right (seed 000, Recordings).

Pipecat's AudioBufferProcessor collects both tracks in memory and hands them over
once at the end of the call; the WAV is written in a worker thread so the event
loop never blocks on disk, and its path is stored in the call record.
"""

from __future__ import annotations

import asyncio
import wave
from pathlib import Path

from loguru import logger
from pipecat.processors.audio.audio_buffer_processor import AudioBufferProcessor

from services.call_session import CallSession

WRITE_TIMEOUT_S = 10.0


def write_wav(path: Path, audio: bytes, sample_rate: int, channels: int) -> None:
    """Write interleaved PCM16 as a WAV file, atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".wav.partial")
    with wave.open(str(partial), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(audio)
    partial.replace(path)


class StereoRecording:
    """Owns the buffer processor for a call and the file it becomes."""

    def __init__(self, session: CallSession, directory: Path) -> None:
        self._session = session
        self.path = directory / f"{session.call_id}.wav"
        self.processor = AudioBufferProcessor(num_channels=2, auto_start_recording=True)
        self._written = asyncio.Event()
        self.processor.add_event_handler("on_audio_data", self._on_audio_data)

    async def _on_audio_data(self, _processor, audio: bytes, sample_rate: int, channels: int) -> None:
        try:
            if audio:
                await asyncio.to_thread(write_wav, self.path, audio, sample_rate, channels)
                self._session.log.update_call(recording_path=str(self.path))
                self._session.log.event(
                    "recording_saved", seconds=round(len(audio) / 2 / channels / sample_rate, 2)
                )
        except OSError as error:
            logger.error(f"call {self._session.call_id}: recording not saved: {error}")
            self._session.log.event("recording_failed", error=type(error).__name__)
        finally:
            self._written.set()

    async def wait_written(self, timeout: float = WRITE_TIMEOUT_S) -> bool:
        """Wait for the end-of-call write; False if it never came (e.g. no audio at all)."""
        try:
            await asyncio.wait_for(self._written.wait(), timeout)
            return True
        except TimeoutError:
            return False
