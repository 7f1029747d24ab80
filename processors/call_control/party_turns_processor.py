"""What a party to a warm hand-off says, into the call's record: each final transcript of
their forked audio is a turn with their speaker role (`caller` or `operator`).

The agent has left the call by then, so these turns are written beside the ones it
recorded: numbered past them, in time order, the two parties' forks never taking the
same number (`party_seq`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pipecat.frames.frames import Frame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from db.records import TurnRecord
from db.writer import CallRecordWriter

PARTIES = ("caller", "operator")


def party_seq(base: int, elapsed_ms: int, party: str) -> int:
    """A turn's number: past `base`, by the time it ended, the caller's even and the
    operator's odd (two forks of one call never collide)."""
    return base + 2 * max(0, elapsed_ms) + PARTIES.index(party)


@dataclass
class PartyTranscript:
    """Where one party's turns go: the call, its writer, the numbers past its records."""

    call_id: str
    party: str
    writer: CallRecordWriter
    base_seq: int
    started: datetime  # when the hand-off began: both forks count from it

    def said(self, text: str) -> None:
        elapsed_ms = int((datetime.now(UTC) - self.started).total_seconds() * 1000)
        self.writer.submit(TurnRecord(
            call_id=self.call_id, seq=party_seq(self.base_seq, elapsed_ms, self.party),
            speaker_id=self.party, speaker_role=self.party, text=text,
            user_speech_end_ms=None))


class PartyTurnsProcessor(FrameProcessor):
    """Writes each final transcript as the party's turn; passes every frame on."""

    def __init__(self, transcript: PartyTranscript, **kwargs) -> None:
        super().__init__(**kwargs)
        self._transcript = transcript

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and frame.text.strip():
            self._transcript.said(frame.text.strip())
        await self.push_frame(frame, direction)
