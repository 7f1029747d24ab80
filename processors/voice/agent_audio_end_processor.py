"""Where agent audio leaves the voice path.

Right after the transport output, which passes on each chunk once it has played it: the
chunk goes into the call's stereo recording (when the call is recorded) and no further.
The call controller and the assistant aggregator after it read the reply's words and the
speaking frames, never its sound, so 25 chunks a second of speech need not cross them.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.recording import StereoRecording


class AgentAudioEndProcessor(FrameProcessor):
    """Agent audio goes no further than the transport output; recorded here when the
    call is."""

    def __init__(self, recording: StereoRecording | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._recording = recording

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, OutputAudioRawFrame) and direction is FrameDirection.DOWNSTREAM:
            if self._recording is not None:
                self._recording.add_agent_audio(frame.audio, frame.sample_rate)
            return
        await self.push_frame(frame, direction)
