"""Who is on a call leg while it runs TwiML outside a `<Connect><Stream>`: whether they
hear each `<Say>` to the end, whether they stay on to be put into a conference, and
what they do once in it. The TwiML itself is run by simulator/twiml_run.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator.caller_audio import encode_ulaw, split_frames
from simulator.media_fork import Mouth
from simulator.personas.run import espeak_voice
from simulator.simulator import SimulationError
from simulator.twilio_conference import ConferenceState

# A line's text → its PCM16 at 8 kHz.
Voice = Callable[[str], Awaitable[bytes]]
# The quiet between two lines a person says in a conference.
LINE_GAP_S = 0.4
# How much of the first <Say> a declining person hears before hanging up.
DECLINE_HEARS = 0.5


class LegPerson(Protocol):
    """The person on a leg, as the TwiML the leg runs meets them."""

    def listens_s(self, seconds: float) -> float | None:
        """How far into a `<Say>` of `seconds` they hang up (None: they hear it all)."""
        ...

    def joins_conferences(self) -> bool:
        """Whether they stay on when the TwiML dials a conference (False: they hang up)."""
        ...

    async def in_conference(self, conference: ConferenceState, mouth: Mouth) -> None:
        """What they do once in `conference`; returning is hanging up. Cancelled when the
        `<Dial>` ends first (the conference ended, or the call was taken elsewhere)."""
        ...


@dataclass(frozen=True)
class ConferencePerson:
    """Someone who hears every `<Say>`, goes into the conference, says `lines` once it has
    started (voiced by `voice`, eSpeak NG unless given), then stays `stay_s` and hangs
    up; with `stay_s` None, stays until the conference ends or the call is taken
    elsewhere. With `stay_s`, nobody coming within it is also a reason to hang up."""

    lines: Sequence[str] = ()
    stay_s: float | None = None
    voice: Voice | None = None

    def listens_s(self, seconds: float) -> float | None:
        return None

    def joins_conferences(self) -> bool:
        return True

    async def in_conference(self, conference: ConferenceState, mouth: Mouth) -> None:
        spoken = [(line, await self._frames(line)) for line in self.lines]
        try:
            await asyncio.wait_for(conference.started.wait(), self.stay_s)
        except TimeoutError:
            return  # still on hold, nobody came
        for number, (text, frames) in enumerate(spoken):
            if number:
                await asyncio.sleep(LINE_GAP_S)
            await mouth.say(text, frames)
        if self.stay_s is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(self.stay_s)

    async def _frames(self, text: str) -> list[bytes]:
        try:
            pcm = await (self.voice or espeak_voice)(text)
        except Exception as error:
            raise SimulationError(f"the voice failed on {text!r}: "
                                  f"{type(error).__name__}: {error}") from error
        frames = split_frames(encode_ulaw(pcm))
        if not frames:
            raise SimulationError(f"the voice produced no audio for {text!r}")
        return frames


@dataclass(frozen=True)
class Decliner:
    """Someone who answers, hears the start of the first `<Say>` and hangs up; told to go
    into a conference before any `<Say>`, they hang up there instead."""

    def listens_s(self, seconds: float) -> float | None:
        return seconds * DECLINE_HEARS

    def joins_conferences(self) -> bool:
        return False

    async def in_conference(self, conference: ConferenceState, mouth: Mouth) -> None:
        return
