"""The audio leg of a simulated call, played exactly the way Twilio plays a phone call.

Twilio streams the caller's line as 8 kHz G.711 μ-law, one 160-byte frame every
20 ms, silence included, for as long as the call lasts; it plays the agent's audio
from a buffer that fills as `media` arrives, empties in real time, is dropped on
`clear`, and answers each `mark` once the audio before it has played. The
simulator must behave the same way, or the server's VAD, turn-taking and
barge-in handling are tested against something no phone call does.

Pure pieces (codec, frame clock, microphone, playout model, message builder)
are kept apart from `AudioCallLeg`, which drives them over one WebSocket.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from loguru import logger
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

SAMPLE_RATE = 8000
FRAME_S = 0.02
FRAME_BYTES = 160  # 20 ms of 8 kHz μ-law
ULAW_SILENCE = 0xFF  # μ-law code of a zero sample

# A 20-40 ms chunk quieter than this (RMS of 16-bit samples, about -47 dBFS) is
# silence, so a server that pads with silence or comfort noise is not "speaking".
VOICED_RMS = 150.0
# The caller cannot know the agent is done before hearing this much quiet. The
# server's own bot-stopped-speaking fires after 0.35 s; sentence gaps in TTS
# output stay well under this, so one reply is one turn.
AGENT_QUIET_S = 0.8
# A barge-in starts this long after the agent starts talking.
BARGE_IN_DELAY_S = 0.5
# After the agent's last reply, give it this long to hang up itself before the
# caller does, so an agent that ends the call is recorded as having ended it.
AGENT_HANGUP_GRACE_S = 1.5
# Behind schedule by more than this (a stalled event loop), the frame clock
# re-anchors instead of bursting frames, as a real network would drop them.
MAX_LAG_S = 0.2

_ULAW_BIAS = 0x84  # in 16-bit units; 0x21 in the 14-bit units the encoder works in
_ULAW_CLIP_14 = 8159


def _encode_table() -> np.ndarray:
    """G.711 μ-law code for every 16-bit sample (index = sample + 32768).

    Sun's reference encoder (what audioop used): it works on the top 14 bits,
    so negative samples round towards minus infinity before taking the magnitude.
    """
    pcm = np.arange(-32768, 32768, dtype=np.int32) >> 2
    negative = pcm < 0
    magnitude = np.minimum(np.where(negative, -pcm, pcm), _ULAW_CLIP_14) + (_ULAW_BIAS >> 2)
    magnitude = np.minimum(magnitude, 0x1FFF)  # past the last segment: the loudest code
    exponent = np.maximum(np.floor(np.log2(magnitude)).astype(np.int32) - 5, 0)
    mantissa = (magnitude >> (exponent + 1)) & 0x0F
    return (((exponent << 4) | mantissa) ^ np.where(negative, 0x7F, 0xFF)).astype(np.uint8)


def _decode_table() -> np.ndarray:
    """16-bit sample for every μ-law code."""
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (code >> 4) & 0x07
    sample = (((code & 0x0F) << 3) + _ULAW_BIAS) << exponent
    sample -= _ULAW_BIAS
    return np.where(code & 0x80, -sample, sample).astype(np.int16)


_ENCODE = _encode_table()
_DECODE = _decode_table()


def encode_ulaw(pcm: bytes) -> bytes:
    """PCM16 little-endian mono to μ-law (no audioop: it is gone in Python 3.13)."""
    samples = np.frombuffer(pcm[: len(pcm) & ~1], dtype="<i2").astype(np.int32)
    return _ENCODE[samples + 32768].tobytes()


def decode_ulaw(ulaw: bytes) -> np.ndarray:
    """μ-law to 16-bit samples."""
    return _DECODE[np.frombuffer(ulaw, dtype=np.uint8)]


def is_voiced(ulaw: bytes, threshold_rms: float = VOICED_RMS) -> bool:
    """Whether a chunk of μ-law audio is louder than line silence."""
    if not ulaw:
        return False
    samples = decode_ulaw(ulaw).astype(np.float64)
    return float(np.sqrt(np.mean(samples * samples))) >= threshold_rms


def split_frames(ulaw: bytes) -> list[bytes]:
    """20 ms frames; the last is padded with silence, as a phone line would be."""
    frames = [ulaw[i : i + FRAME_BYTES] for i in range(0, len(ulaw), FRAME_BYTES)]
    if frames and len(frames[-1]) < FRAME_BYTES:
        frames[-1] = frames[-1] + bytes([ULAW_SILENCE]) * (FRAME_BYTES - len(frames[-1]))
    return frames


SILENCE_FRAME = bytes([ULAW_SILENCE]) * FRAME_BYTES


class FrameClock:
    """Deadlines every 20 ms on the monotonic clock, so sleep overshoot never accumulates."""

    def __init__(self, period_s: float = FRAME_S, clock: Callable[[], float] = time.monotonic):
        self._period = period_s
        self._clock = clock
        self._anchor = clock()
        self.index = 0  # frames released so far

    async def next_frame(self) -> int:
        """Wait for the next frame's deadline; the index of the frame to send now."""
        deadline = self._anchor + self.index * self._period
        delay = deadline - self._clock()
        if delay > 0:
            await asyncio.sleep(delay)
        elif -delay > MAX_LAG_S:
            logger.debug(f"frame clock {-delay:.3f} s behind; re-anchoring")
            self._anchor = self._clock() - self.index * self._period
        index = self.index
        self.index += 1
        return index


class CallerMicrophone:
    """What the caller's line carries: queued speech frames, else μ-law silence."""

    def __init__(self) -> None:
        self._frames: deque[bytes] = deque()
        self._queued = 0
        self._sent = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def speaking(self) -> bool:
        return bool(self._frames)

    def say(self, frames: list[bytes]) -> asyncio.Future[None]:
        """Queue an utterance; the future resolves once its last frame is on the line."""
        self._frames.extend(frames)
        self._queued += len(frames)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._queued, done))
        self._release()
        return done

    def next_frame(self) -> bytes:
        if not self._frames:
            return SILENCE_FRAME
        frame = self._frames.popleft()
        self._sent += 1
        self._release()
        return frame

    def hang_up(self) -> None:
        """Drop unspoken audio and release everyone waiting on it."""
        self._frames.clear()
        self._sent = self._queued
        self._release()

    def _release(self) -> None:
        still_waiting = []
        for target, done in self._waiters:
            if self._sent >= target:
                if not done.done():
                    done.set_result(None)
            else:
                still_waiting.append((target, done))
        self._waiters = still_waiting


@dataclass
class SpeechSegment:
    """A stretch of agent speech as the caller heard it (seconds since the stream started)."""

    start_s: float
    end_s: float
    cut_short: bool = False  # ended by a `clear`: the agent was interrupted


class AgentPlayout:
    """Twilio's playback buffer for the agent's audio, and what the caller heard from it.

    Media is played back to back from when it arrives; a `clear` drops whatever
    has not been played; a `mark` is answered once the audio queued before it has
    played (or immediately when a `clear` drops it).
    """

    def __init__(self, merge_gap_s: float = AGENT_QUIET_S, voiced_rms: float = VOICED_RMS):
        self._merge_gap = merge_gap_s
        self._voiced_rms = voiced_rms
        self._buffer_end = 0.0
        self._marks: deque[tuple[float, str]] = deque()
        self.segments: list[SpeechSegment] = []
        self.media_received = 0

    def receive_media(self, ulaw: bytes, now: float) -> SpeechSegment | None:
        """Queue agent audio for playback; the new segment if this starts one."""
        self.media_received += 1
        start = max(now, self._buffer_end)
        end = start + len(ulaw) / SAMPLE_RATE
        self._buffer_end = end
        if not is_voiced(ulaw, self._voiced_rms):
            return None
        last = self.segments[-1] if self.segments else None
        if last is not None and not last.cut_short and start - last.end_s <= self._merge_gap:
            last.end_s = end
            return None
        segment = SpeechSegment(start, end)
        self.segments.append(segment)
        return segment

    def receive_mark(self, name: str, now: float) -> None:
        self._marks.append((max(now, self._buffer_end), name))

    def clear(self, now: float) -> tuple[float, list[str]]:
        """Drop unplayed audio: the seconds dropped, and the marks to answer now."""
        dropped = max(0.0, self._buffer_end - now)
        self._buffer_end = min(self._buffer_end, now)
        kept = []
        for segment in self.segments:
            if segment.start_s >= now:
                continue  # queued but never heard
            if segment.end_s > now:
                segment.end_s = now
                segment.cut_short = True
            kept.append(segment)
        self.segments = kept
        released = [name for _, name in self._marks]
        self._marks.clear()
        return dropped, released

    def hang_up(self, now: float) -> None:
        """The caller stops hearing: nothing queued after `now` was heard."""
        self.segments = [segment for segment in self.segments if segment.start_s < now]
        for segment in self.segments:
            segment.end_s = min(segment.end_s, now)
        self._buffer_end = min(self._buffer_end, now)

    def due_marks(self, now: float) -> list[str]:
        due = []
        while self._marks and self._marks[0][0] <= now:
            due.append(self._marks.popleft()[1])
        return due

    def heard_since(self, since: float, now: float) -> SpeechSegment | None:
        """The latest segment the caller has started hearing that runs past `since`."""
        for segment in reversed(self.segments):
            if segment.start_s <= now and segment.end_s > since:
                return segment
        return None

    def mid_turn(self, now: float, quiet_s: float) -> bool:
        """Whether the agent is in the middle of a turn (speaking, or paused under `quiet_s`)."""
        if not self.segments or self.segments[-1].start_s > now:
            return False
        return now - self.segments[-1].end_s < quiet_s

    def turn_finished(self, since: float, now: float, quiet_s: float) -> bool:
        """The agent spoke after `since`, and has now been quiet for `quiet_s`."""
        if self.heard_since(since, now) is None:
            return False
        return now - self.segments[-1].end_s >= quiet_s and self._buffer_end <= now


@dataclass(frozen=True)
class StreamIdentity:
    """The identifiers Twilio puts in a stream's `start` message."""

    account_sid: str
    call_sid: str
    stream_sid: str
    custom_parameters: dict[str, str] = field(default_factory=dict)


class TwilioMessages:
    """Media Streams messages as Twilio sends them, with its sequence numbering. `tracks`:
    what the stream carries (a `<Start><Stream>` fork may carry the outbound track too)."""

    def __init__(self, identity: StreamIdentity, tracks: tuple[str, ...] = ("inbound",)) -> None:
        self._identity = identity
        self._tracks = tracks
        self._sequence = 0

    def _next(self) -> str:
        self._sequence += 1
        return str(self._sequence)

    def connected(self) -> str:
        return json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})

    def start(self) -> str:
        ident = self._identity
        return json.dumps({
            "event": "start",
            "sequenceNumber": self._next(),
            "start": {
                "streamSid": ident.stream_sid,
                "accountSid": ident.account_sid,
                "callSid": ident.call_sid,
                "tracks": list(self._tracks),
                "customParameters": dict(ident.custom_parameters),
                "mediaFormat": {
                    "encoding": "audio/x-mulaw", "sampleRate": SAMPLE_RATE, "channels": 1,
                },
            },
            "streamSid": ident.stream_sid,
        })

    def media(self, frame: bytes, index: int, track: str = "inbound") -> str:
        return json.dumps({
            "event": "media",
            "sequenceNumber": self._next(),
            "media": {
                "track": track,
                "chunk": str(index + 1),
                "timestamp": str(round(index * FRAME_S * 1000)),
                "payload": base64.b64encode(frame).decode("ascii"),
            },
            "streamSid": self._identity.stream_sid,
        })

    def mark(self, name: str) -> str:
        return json.dumps({
            "event": "mark",
            "sequenceNumber": self._next(),
            "streamSid": self._identity.stream_sid,
            "mark": {"name": name},
        })

    def stop(self) -> str:
        ident = self._identity
        return json.dumps({
            "event": "stop",
            "sequenceNumber": self._next(),
            "stop": {"accountSid": ident.account_sid, "callSid": ident.call_sid},
            "streamSid": ident.stream_sid,
        })


@dataclass(frozen=True)
class LineCue:
    """When the caller's next line goes: once the agent is done (after a pause), or
    barging in while it speaks; `wait_s` is the longest wait for the agent."""

    pause_s: float
    barge_in: bool
    wait_s: float


@dataclass(frozen=True)
class CallerLine:
    """One caller line, already synthesized to μ-law frames (none on a text call)."""

    number: int
    text: str
    frames: list[bytes]
    pause_s: float
    barge_in: bool
    wait_s: float

    @property
    def cue(self) -> LineCue:
        return LineCue(self.pause_s, self.barge_in, self.wait_s)


class Caller(Protocol):
    """Who speaks on the caller's side of a leg: first when the next line goes (`next_cue`,
    None: no more lines), then, once that moment has come, the line itself from what the
    agent said since the caller last spoke (`next_line`, None: hang up now instead).
    `hangup_after_s`: after the last line, hang up this long after it instead of waiting
    for the agent to finish."""

    hangup_after_s: float | None

    def next_cue(self) -> LineCue | None: ...

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None: ...


class ScriptedCaller:
    """A caller who says fixed lines in order, whatever the agent says."""

    def __init__(self, lines: list[CallerLine], hangup_after_s: float | None = None) -> None:
        self._lines = list(lines)
        self._next = 0
        self.hangup_after_s = hangup_after_s

    def next_cue(self) -> LineCue | None:
        return self._lines[self._next].cue if self._next < len(self._lines) else None

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None:
        line = self._lines[self._next]
        self._next += 1
        return line


class AgentWords(Protocol):
    """What the agent said since a moment of the call (seconds on the call's clock), for a
    caller who answers it; an audio leg cannot read it from the audio itself."""

    async def since(self, at_s: float) -> list[str]: ...


class Timeline(Protocol):
    """Where the leg notes what happened, on the call's clock."""

    def now(self) -> float: ...

    def note(self, kind: str, detail: str = "", at_s: float | None = None) -> None: ...


EndedBy = Literal["caller", "agent"]


@dataclass
class AudioOutcome:
    """How the audio leg ended and what the caller heard."""

    ended_by: EndedBy
    agent_speech: list[SpeechSegment]
    close_code: int | None
    close_reason: str
    frames_sent: int
    agent_media_received: int


class AudioCallLeg:
    """Plays a caller over one Twilio media stream: paced audio out, agent audio in."""

    def __init__(
        self,
        websocket: ClientConnection,
        identity: StreamIdentity,
        timeline: Timeline,
        *,
        quiet_s: float = AGENT_QUIET_S,
        agent_words: AgentWords | None = None,
    ) -> None:
        self._ws = websocket
        self._agent_words = agent_words
        self._timeline = timeline
        self._messages = TwilioMessages(identity)
        self._mic = CallerMicrophone()
        self._playout = AgentPlayout(merge_gap_s=quiet_s)
        self._quiet_s = quiet_s
        self._closed = asyncio.Event()
        self._close_code: int | None = None
        self._close_reason = ""
        self._frames_sent = 0
        self._barge_in_at: float | None = None
        self._marks_to_answer: list[str] = []  # released by a `clear`, sent on the next tick
        self._stopped = False  # Twilio stopped the stream, not the server

    def stop(self) -> None:
        """Twilio stops the stream (its call was given new TwiML, or hung up through the REST
        API): the conversation ends at once, with a `stop` and the socket closed."""
        self._stopped = True
        self._closed.set()

    async def run(self, caller: Caller) -> AudioOutcome:
        """Open the stream, hold the conversation, hang up; never leaves a task behind."""
        try:
            await self._ws.send(self._messages.connected())
            await self._ws.send(self._messages.start())
        except ConnectionClosed as closed:
            self._note_closed(closed)
        sender = asyncio.create_task(self._send_media(), name="caller-media")
        receiver = asyncio.create_task(self._receive(), name="agent-media")
        try:
            ended_by = await self._converse(caller)
        finally:
            self._mic.hang_up()
            self._playout.hang_up(self._timeline.now())
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            await self._hang_up()
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)
        return AudioOutcome(
            ended_by=ended_by,
            agent_speech=list(self._playout.segments),
            close_code=self._close_code,
            close_reason=self._close_reason,
            frames_sent=self._frames_sent,
            agent_media_received=self._playout.media_received,
        )

    # -- the conversation ------------------------------------------------------

    async def _converse(self, caller: Caller) -> EndedBy:
        since, number, wait_s = 0.0, 0, 0.0
        while (cue := caller.next_cue()) is not None:
            number += 1
            wait_s = cue.wait_s
            if cue.barge_in:
                await self._wait_to_barge_in(number, cue.wait_s, since)
            else:
                await self._wait_for_agent(cue.wait_s, since, f"line {number}")
                await self._pause(cue.pause_s)
            if self._closed.is_set():
                return self._agent_ended(f"before caller line {number}")
            heard = await self._agent_words.since(since) if self._agent_words else []
            line = await caller.next_line(number, heard)
            if line is None:  # the caller hangs up instead
                return self._caller_hangs_up()
            await self._speak(line)
            since = self._timeline.now()
            if self._closed.is_set():
                return self._agent_ended(f"during caller line {number}")
        if caller.hangup_after_s is not None:
            await self._pause(caller.hangup_after_s)
        elif number:
            await self._wait_for_agent(wait_s, since, "the end of the call")
            await self._pause(AGENT_HANGUP_GRACE_S)
        if self._closed.is_set():
            return self._agent_ended("after the last caller line")
        return self._caller_hangs_up()

    def _agent_ended(self, when: str) -> EndedBy:
        self._timeline.note("stream_stopped" if self._stopped else "agent_hung_up", when)
        return "agent"

    def _caller_hangs_up(self) -> EndedBy:
        speaking = self._playout.mid_turn(self._timeline.now(), self._quiet_s)
        self._timeline.note("caller_hangup", "during the agent's turn" if speaking else "")
        return "caller"

    async def _wait_for_agent(self, wait_s: float, since: float, before: str) -> None:
        deadline = self._timeline.now() + wait_s
        while not self._closed.is_set():
            now = self._timeline.now()
            if self._playout.turn_finished(since, now, self._quiet_s):
                return
            if now >= deadline:
                self._timeline.note(
                    "wait_timeout", f"agent not done after {wait_s:g} s; {before} goes ahead"
                )
                return
            await self._sleep_or_close(FRAME_S)

    async def _wait_to_barge_in(self, number: int, wait_s: float, since: float) -> None:
        deadline = self._timeline.now() + wait_s
        while not self._closed.is_set():
            now = self._timeline.now()
            segment = self._playout.heard_since(since, now)
            if segment is not None:
                target = max(segment.start_s, since) + BARGE_IN_DELAY_S
                await self._sleep_or_close(max(0.0, target - now))
                self._barge_in_at = self._timeline.now()
                self._timeline.note(
                    "barge_in",
                    f"line {number} starts {self._barge_in_at - segment.start_s:.2f} s "
                    "into agent speech",
                )
                return
            if now >= deadline:
                self._timeline.note(
                    "wait_timeout", f"agent never spoke in {wait_s:g} s; no barge-in"
                )
                return
            await self._sleep_or_close(FRAME_S)

    async def _speak(self, line: CallerLine) -> None:
        duration = len(line.frames) * FRAME_S
        self._timeline.note("caller_line", f"{line.number} ({duration:.1f} s): {line.text}")
        done = self._mic.say(line.frames)
        closed = asyncio.create_task(self._closed.wait())
        await asyncio.wait({done, closed}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()

    async def _pause(self, seconds: float) -> None:
        await self._sleep_or_close(seconds)

    async def _sleep_or_close(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._closed.wait(), timeout=seconds)
        except TimeoutError:
            pass

    # -- the wire --------------------------------------------------------------

    async def _send_media(self) -> None:
        """One frame every 20 ms, speech or silence, until the call ends."""
        clock = FrameClock(clock=self._timeline.now)
        try:
            while True:
                index = await clock.next_frame()
                answered, self._marks_to_answer = self._marks_to_answer, []
                for name in answered + self._playout.due_marks(self._timeline.now()):
                    await self._ws.send(self._messages.mark(name))
                await self._ws.send(self._messages.media(self._mic.next_frame(), index))
                self._frames_sent += 1
        except ConnectionClosed as closed:
            self._note_closed(closed)

    async def _receive(self) -> None:
        try:
            async for raw in self._ws:
                self._handle(raw)
        except ConnectionClosed as closed:
            self._note_closed(closed)
            return
        self._note_closed(None)

    def _handle(self, raw: str | bytes) -> None:
        """One server message: agent audio, a `clear`, or a `mark` to answer once played."""
        try:
            message: Any = json.loads(raw)
            event, now = message.get("event"), self._timeline.now()
            if event == "media":
                audio = base64.b64decode(message["media"]["payload"])
                started = self._playout.receive_media(audio, now)
                if started is not None:
                    self._timeline.note("agent_speaking", "", at_s=started.start_s)
            elif event == "clear":
                self._clear(now)
            elif event == "mark":
                self._playout.receive_mark(str(message["mark"]["name"]), now)
            else:
                logger.debug(f"media stream: ignoring server event {event!s:.40}")
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            kind = type(error).__name__
            logger.warning(f"media stream: malformed server message ignored ({kind})")

    def _clear(self, now: float) -> None:
        dropped, marks = self._playout.clear(now)
        detail = f"{dropped:.2f} s of agent audio dropped" if dropped else "nothing was playing"
        if self._barge_in_at is not None:
            detail += f", {now - self._barge_in_at:.2f} s after the barge-in"
            self._barge_in_at = None
        self._timeline.note("clear", detail)
        self._marks_to_answer.extend(marks)

    def _note_closed(self, closed: ConnectionClosed | None) -> None:
        if self._closed.is_set():
            return
        frame = closed.rcvd if closed is not None else None
        if frame is None and self._ws.close_code is not None:
            self._close_code, self._close_reason = self._ws.close_code, self._ws.close_reason or ""
        elif frame is not None:
            self._close_code, self._close_reason = frame.code, frame.reason
        self._closed.set()

    async def _hang_up(self) -> None:
        """Twilio's way: a `stop` event, then the socket closes."""
        if self._stopped or not self._closed.is_set():
            try:
                await self._ws.send(self._messages.stop())
            except ConnectionClosed:
                pass
        await self._ws.close()
