"""The caller's audio of their last turn, kept for a second look (audio verification).

A rolling buffer of the last seconds of caller audio, with the turn's start marked when
the caller starts speaking (a little before: VAD fires after the voice starts) and the
turn closed when the turn ends. Fed by `CallerAudioEndProcessor`; read by the navigator when
the turn carries structured data worth re-hearing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KEEP_S = 15.0
PRE_ROLL_S = 0.3
BYTES_PER_SAMPLE = 2


@dataclass
class TurnAudio:
    keep_s: float = KEEP_S
    sample_rate: int = 8000
    _buffer: bytearray = field(default_factory=bytearray)
    _dropped: int = 0  # bytes dropped from the front since the call began
    _start: int | None = None  # absolute byte offset of the current turn's start
    last_turn: bytes = b""

    def add(self, pcm: bytes, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._buffer += pcm
        limit = int(self.keep_s * sample_rate) * BYTES_PER_SAMPLE
        if len(self._buffer) > limit:
            excess = len(self._buffer) - limit
            del self._buffer[:excess]
            self._dropped += excess

    def started(self) -> None:
        """The caller started speaking (the turn's audio begins a little earlier)."""
        if self._start is None:
            pre_roll = int(PRE_ROLL_S * self.sample_rate) * BYTES_PER_SAMPLE
            self._start = max(self._dropped, self._dropped + len(self._buffer) - pre_roll)

    def stopped(self) -> None:
        """The turn ended: its audio is `last_turn` until the next one ends."""
        if self._start is None:
            return
        begin = max(0, self._start - self._dropped)
        self.last_turn = bytes(self._buffer[begin:])
        self._start = None
