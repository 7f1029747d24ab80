"""An in-memory transport that behaves like a phone line: 20 ms frames in, real-time playback out.

Benchmarks feed the same caller audio into our pipeline and into a bare Pipecat
pipeline through this transport and compare when the first agent audio comes out.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from pipecat.frames.frames import InputAudioRawFrame, OutputAudioRawFrame, StartFrame
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import BaseTransport, TransportParams

from bench.report import percentile  # noqa: F401  (re-exported: benches import it here)

FRAME_MS = 20


class MemoryInput(BaseInputTransport):
    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def feed(self, pcm: bytes, sample_rate: int) -> None:
        await self.push_audio_frame(InputAudioRawFrame(audio=pcm, sample_rate=sample_rate, num_channels=1))


class MemoryOutput(BaseOutputTransport):
    """Plays audio at real-time pace and remembers when each chunk went out."""

    def __init__(self, params: TransportParams, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.audio_times: list[float] = []
        self._next_send = 0.0

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        self.audio_times.append(time.perf_counter())
        interval = len(frame.audio) / 2 / frame.sample_rate
        now = time.monotonic()
        delay = max(0.0, self._next_send - now)
        await asyncio.sleep(delay)
        self._next_send = (now if delay == 0 else self._next_send) + interval
        return True

    def first_audio_after(self, moment: float) -> float | None:
        return next((t for t in self.audio_times if t >= moment), None)


class MemoryTransport(BaseTransport):
    def __init__(self, sample_rate: int = 8000) -> None:
        super().__init__()
        params = TransportParams(
            audio_in_enabled=True, audio_out_enabled=True,
            audio_in_sample_rate=sample_rate, audio_out_sample_rate=sample_rate,
        )
        self._input = MemoryInput(params)
        self._output = MemoryOutput(params)

    def input(self) -> MemoryInput:
        return self._input

    def output(self) -> MemoryOutput:
        return self._output


def trim_trailing_silence(pcm: bytes, sample_rate: int, voiced_rms: float = 100.0) -> bytes:
    """Cut the synthesizer's trailing pause so "end of speech" is the end of the voice."""
    step = sample_rate * 2 * FRAME_MS // 1000
    samples = np.frombuffer(pcm[: len(pcm) // step * step], dtype="<i2").astype(np.float64)
    frames = samples.reshape(-1, step // 2)
    voiced = np.nonzero(np.sqrt((frames**2).mean(axis=1)) > voiced_rms)[0]
    return pcm[: (int(voiced[-1]) + 1) * step] if len(voiced) else pcm


async def speak(transport: MemoryTransport, pcm: bytes, sample_rate: int, silence_s: float) -> float:
    """Feed an utterance then silence at real-time pace; returns when the voice ended.

    `pcm` should end with its last voiced frame (see `trim_trailing_silence`).
    """
    step = sample_rate * 2 * FRAME_MS // 1000
    silence = b"\x00" * step
    start = time.perf_counter()
    frames = [pcm[i : i + step].ljust(step, b"\x00") for i in range(0, len(pcm), step)]
    for index, chunk in enumerate(frames):
        await _at(start + index * FRAME_MS / 1000)
        await transport.input().feed(chunk, sample_rate)
    speech_end = time.perf_counter()
    for index in range(int(silence_s * 1000 / FRAME_MS)):
        await _at(speech_end + index * FRAME_MS / 1000)
        await transport.input().feed(silence, sample_rate)
    return speech_end


async def _at(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


