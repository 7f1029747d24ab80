"""The agent recording tap: what the transport output actually played.

Right after the transport output, each agent audio frame is handed to the call's stereo
recording and passed on unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from pipecat.frames.frames import AudioRawFrame, Frame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.recording import StereoRecording


class AudioTapProcessor(FrameProcessor):
    """Hands one kind of audio flowing downstream to `record`; passes every frame on."""

    def __init__(
        self, frame_type: type[AudioRawFrame], record: Callable[[bytes, int], None], **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self._frame_type = frame_type
        self._record = record

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, self._frame_type) and direction is FrameDirection.DOWNSTREAM:
            self._record(frame.audio, frame.sample_rate)
        await self.push_frame(frame, direction)


def agent_audio_tap(recording: StereoRecording) -> AudioTapProcessor:
    """Right after the transport output: the agent audio actually played."""
    return AudioTapProcessor(OutputAudioRawFrame, recording.add_agent_audio)
