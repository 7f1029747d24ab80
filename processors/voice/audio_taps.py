"""Where audio leaves the voice path: the end of the caller's audio, and the agent recording tap.

Every 20 ms of caller audio is a frame, and every processor a frame crosses costs
the event loop a queue hand-off: with dozens of calls that per-frame work is what
limits calls per process. So caller audio crosses only the processors that
listen to it (STT, then the user aggregator's VAD and turn model) and ends at
`CallerAudioEnd`, which records it on the way out. The agent tap records what
the transport output actually played.
"""

from __future__ import annotations

from collections.abc import Callable

from pipecat.frames.frames import (
    AudioRawFrame,
    Frame,
    InputAudioRawFrame,
    OutputAudioRawFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.recording import StereoRecording
from call.turn_audio import TurnAudio


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


def agent_audio_tap(recording: StereoRecording) -> AudioTap:
    """Right after the transport output: the agent audio actually played."""
    return AudioTap(OutputAudioRawFrame, recording.add_agent_audio)


class CallerAudioEnd(FrameProcessor):
    """Caller audio goes no further than turn detection; recorded here when the call is.

    Pipecat never drops or holds caller audio before this point (it is a system
    frame: interruptions do not flush it), so the recording still has every frame,
    a few milliseconds later than the transport received it.
    """

    def __init__(self, recording: StereoRecording | None = None,
                 turn_audio: TurnAudio | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._recording = recording
        self._turn_audio = turn_audio

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, InputAudioRawFrame):
            if self._turn_audio is not None:
                if isinstance(frame, UserStartedSpeakingFrame):
                    self._turn_audio.started()
                elif isinstance(frame, UserStoppedSpeakingFrame):
                    self._turn_audio.stopped()
            await self.push_frame(frame, direction)
            return
        if self._recording is not None:
            self._recording.add_caller_audio(frame.audio, frame.sample_rate)
        if self._turn_audio is not None:
            self._turn_audio.add(frame.audio, frame.sample_rate)
