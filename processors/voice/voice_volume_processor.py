"""The workspace's voice volume for a TTS that has no volume control of its own.

eSpeak NG takes volume as a synthesis setting; ElevenLabs has none (its voice settings
are stability, similarity, style, speaker boost and speed), so its audio is scaled here,
right after the TTS, by the workspace's `volume` (0–2, 1 = as synthesized), clipped to
16 bits. Emotion never changes it: volume is the workspace's setting.
"""

from __future__ import annotations

import numpy as np
from pipecat.frames.frames import Frame, TTSAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


def scaled(pcm: bytes, volume: float) -> bytes:
    """PCM16 mono scaled by `volume`, clipped instead of wrapping around."""
    samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float32)
    return np.clip(np.rint(samples * volume), -32768, 32767).astype("<i2").tobytes()


class VoiceVolumeProcessor(FrameProcessor):
    def __init__(self, volume: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self._volume = volume

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            frame.audio = scaled(frame.audio, self._volume)
        await self.push_frame(frame, direction)
