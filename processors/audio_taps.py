"""Where audio leaves the voice path: recording taps and the end of the caller's audio.

Every 20 ms of caller audio is a frame; carried through every processor to reach
a recorder at the end of the pipeline it was most of a call's frame traffic.
Instead the caller tap records it right after the transport input, the agent tap
records what the transport output actually played, and `CallerAudioStop` ends
the caller's audio after the last processor that listens to it (the user
aggregator's VAD and turn model).
"""

from __future__ import annotations

from collections.abc import Callable

from pipecat.frames.frames import (
    AudioRawFrame,
    Frame,
    InputAudioRawFrame,
    OutputAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from services.recording import StereoRecording


class AudioTap(FrameProcessor):
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


def caller_audio_tap(recording: StereoRecording) -> AudioTap:
    """Right after the transport input: every frame of the caller's audio."""
    return AudioTap(InputAudioRawFrame, recording.add_caller_audio)


def agent_audio_tap(recording: StereoRecording) -> AudioTap:
    """Right after the transport output: the agent audio actually played."""
    return AudioTap(OutputAudioRawFrame, recording.add_agent_audio)


class CallerAudioStop(FrameProcessor):
    """Caller audio goes no further: nothing after turn detection uses it."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, InputAudioRawFrame):
            await self.push_frame(frame, direction)
