"""What a voice provider's fault costs and what comes next: plain rules the resilient
STT and TTS services follow, kept apart from Pipecat so they are tested alone.

- A dropped stream is reopened after an exponentially growing wait, at most
  `ReconnectPolicy.tries` times in a row; a connection that proved itself (it carried
  a result, or stayed up `stable_s`) starts the count again.
- Caller audio the recognizer has not confirmed is kept (`UnconfirmedAudio`), so a
  reopened stream hears it again and no words are lost.
- A sentence cut off mid-way is finished from its first unheard word
  (`unspoken_words`).
- A provider message that does not parse as its protocol says is skipped
  (`screened_elevenlabs`), never allowed to end the stream.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Records one fault in the call record: `sink("stt_reconnect", attempt=1, ...)`.
FaultSink = Callable[..., None]


def ignore_faults(_type: str, **_data: Any) -> None:
    """The sink of a service built outside a call (tests, warm-up): nothing to record."""


@dataclass(frozen=True)
class ReconnectPolicy:
    """How a dropped provider stream is reopened."""

    tries: int = 3
    first_delay_s: float = 0.25
    factor: float = 2.0
    max_delay_s: float = 2.0
    stable_s: float = 5.0  # a connection up this long (or that delivered a result) proved itself

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try `attempt` (1-based): first, first x factor, ..."""
        return min(self.max_delay_s, self.first_delay_s * self.factor ** max(0, attempt - 1))


class ReconnectBudget:
    """Counts the tries since the stream last worked; None once they are spent."""

    def __init__(self, policy: ReconnectPolicy) -> None:
        self.policy = policy
        self.attempt = 0

    def proved(self) -> None:
        """The stream works again (a result arrived, or it stayed up): a fresh count."""
        self.attempt = 0

    def next_try(self, uptime_s: float) -> int | None:
        """After a failure: the number of the try to make now, or None (give up)."""
        if uptime_s >= self.policy.stable_s:
            self.attempt = 0
        self.attempt += 1
        return self.attempt if self.attempt <= self.policy.tries else None

    @property
    def spent(self) -> bool:
        return self.attempt > self.policy.tries


class UnconfirmedAudio:
    """Caller audio for a streaming recognizer that no final result has covered yet.

    Stream time is the audio's own clock on the current connection (seconds of audio
    since it opened); a final result covers the stream up to its `start + duration`.
    A reopened stream hears the kept audio first and its clock starts again with it.
    At most `max_s` seconds are kept (the oldest goes first). Positions are absolute
    byte counts since the call began, so a sender can resume where it stopped.
    """

    def __init__(self, sample_rate: int, *, max_s: float = 15.0, sample_width: int = 2) -> None:
        self.bytes_per_s = sample_rate * sample_width
        self._max_bytes = int(max_s * self.bytes_per_s)
        self._audio = bytearray()
        self.front = 0  # absolute position of the first kept byte
        self._front_s = 0.0  # its stream time on the current connection

    @property
    def seconds(self) -> float:
        return len(self._audio) / self.bytes_per_s

    @property
    def end(self) -> int:
        return self.front + len(self._audio)

    def add(self, chunk: bytes) -> None:
        self._audio += chunk
        extra = len(self._audio) - self._max_bytes
        if extra > 0:
            self._drop(extra + extra % 2)

    def confirm_until(self, stream_s: float) -> None:
        """A final result covered the stream up to `stream_s`: that audio is done."""
        covered = int((stream_s - self._front_s) * self.bytes_per_s)
        if covered > 0:
            self._drop(min(len(self._audio), covered - covered % 2))

    def new_stream(self) -> int:
        """A connection opens: its clock starts at the first kept byte, whose position
        is returned (send from there)."""
        self._front_s = 0.0
        return self.front

    def since(self, position: int) -> bytes:
        """The kept audio from absolute `position` on."""
        return bytes(self._audio[max(0, position - self.front):])

    def _drop(self, count: int) -> None:
        del self._audio[:count]
        self.front += count
        self._front_s += count / self.bytes_per_s


def unspoken_words(sent: str, voiced_words: int) -> str:
    """The words of `sent` after the first `voiced_words` the caller has heard."""
    return " ".join(sent.split()[voiced_words:])


def _is_base64(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _is_alignment(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    lists = [value.get(k) for k in ("chars", "charStartTimesMs", "charDurationsMs")]
    return all(isinstance(v, list) for v in lists) and len({len(v) for v in lists}) == 1


def screened_elevenlabs(raw: str | bytes) -> dict[str, Any] | None:
    """An ElevenLabs stream message as its protocol documents it (a JSON object whose
    `audio` is base64 and whose alignments are parallel lists), else None."""
    try:
        message = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(message, dict):
        return None
    if message.get("audio") and not _is_base64(message["audio"]):
        return None
    if not all(_is_alignment(message.get(k)) for k in ("alignment", "normalizedAlignment")):
        return None
    return message
