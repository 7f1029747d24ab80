"""Where audio leaves the voice path: recording taps and the end of the caller's audio.

Every 20 ms of caller audio is a frame; carried through every processor to reach
a recorder at the end of the pipeline it was most of a call's frame traffic.
Instead the caller tap records it right after the transport input, the agent tap
records what the transport output actually played, and `CallerAudioStop` ends
the caller's audio after the last processor that listens to it (the user
aggregator's VAD and turn model).
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, InputAudioRawFrame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from services.recording import StereoRecording


class CallerAudioTap(FrameProcessor):
    """Copies caller audio into the recording; passes every frame on untouched."""

    def __init__(self, recording: StereoRecording, **kwargs) -> None:
        super().__init__(**kwargs)
        self._recording = recording

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            self._recording.add_caller_audio(frame.audio, frame.sample_rate)
        await self.push_frame(frame, direction)


class AgentAudioTap(FrameProcessor):
    """Copies the agent audio the transport played into the recording."""

    def __init__(self, recording: StereoRecording, **kwargs) -> None:
        super().__init__(**kwargs)
        self._recording = recording

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, OutputAudioRawFrame) and direction is FrameDirection.DOWNSTREAM:
            self._recording.add_agent_audio(frame.audio, frame.sample_rate)
        await self.push_frame(frame, direction)


class CallerAudioStop(FrameProcessor):
    """Caller audio goes no further: nothing after turn detection uses it."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, InputAudioRawFrame):
            await self.push_frame(frame, direction)
