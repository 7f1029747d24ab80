"""Where caller audio leaves the voice path.

Every 20 ms of caller audio is a frame, and every processor a frame crosses costs the
event loop a queue hand-off: with dozens of calls that per-frame work is what limits calls
per process. So caller audio crosses only the processors that listen to it (STT, then the
user aggregator's VAD and turn model) and ends here, recorded on the way out, with the
caller's last turn kept for audio verification.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.recording import StereoRecording
from call.turn_audio import TurnAudio


class CallerAudioEndProcessor(FrameProcessor):
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
