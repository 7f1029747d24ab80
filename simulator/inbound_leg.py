"""A call the simulator makes into the service, as the Twilio stand-in's REST API sees it.

The simulator plays Twilio for its inbound calls itself (simulator/simulator.py posts
`/voice/answer` and runs the `/ws` media stream); registering the call with the stand-in
(`FakeTwilioRest.add_inbound`) lets the service act on it through the REST API as it
would on a real call: read it, hang it up (`Status=completed`: `hung_up` is set), or give
it new TwiML (`Twiml=` or `Url=`: `redirected` is set, and the TwiML runs as the caller's
leg, simulator/twiml_run.py: the caller hears each `<Say>` and the hold music, goes into
the conference, and says `conference_lines` there once it has started, on the call's
forks). New TwiML that is a `<Connect><Stream>` (the service taking the caller back to
the agent) sets `reconnect` (url, parameters) and `reconnected`, for the simulator to
open its media stream there; the simulator says when each of its streams ends
(`stream_ended`). `finished` is set once the call is over.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from simulator.leg_people import ConferencePerson, Voice
from simulator.media_fork import ForkRecord
from simulator.simulator import CallParties
from simulator.twilio_wire import rfc2822
from simulator.twiml_run import Document, LegWiring, TwimlLeg


@dataclass
class InboundLeg:
    """One inbound call: its Twilio call resource (`resource`, as `GET Calls/{Sid}.json`
    answers), what the caller heard and said outside the media stream, and the events
    the simulator follows. `conference_lines`: what the caller says once in a conference
    (voiced by `voice`, text → PCM16 at 8 kHz; eSpeak NG when None)."""

    resource: dict[str, Any]
    wiring: LegWiring
    conference_lines: list[str] = field(default_factory=list)
    voice: Voice | None = None
    said: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    spoken: list[str] = field(default_factory=list)
    conferences: list[str] = field(default_factory=list)
    forks: list[ForkRecord] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    error: str | None = None
    error_code: int | None = None
    ended_by: str | None = None
    reconnect: tuple[str, dict[str, str]] | None = None
    redirected: asyncio.Event = field(default_factory=asyncio.Event)
    reconnected: asyncio.Event = field(default_factory=asyncio.Event)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    _leg: TwimlLeg | None = None
    _task: asyncio.Task[None] | None = None
    _stream_over: asyncio.Event = field(default_factory=asyncio.Event)
    _caller_gone: bool = False
    _answered_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def sid(self) -> str:
        return str(self.resource["sid"])

    @property
    def ended(self) -> bool:
        return self.finished.is_set()

    # -- what the service does through the REST API ---------------------------------

    def give(self, document: Document) -> None:
        """New TwiML for the call (`Twiml=` or `Url=`): it runs as the caller's leg."""
        self.reconnect = None
        self.reconnected.clear()
        self.redirected.set()
        if self._leg is not None:
            self._leg.redirect(document)
            return
        parties = CallParties(
            call_sid=self.sid, account_sid=self.resource["account_sid"],
            stream_sid="", from_number=self.resource["from"], to_number=self.resource["to"])
        person = ConferencePerson(tuple(self.conference_lines), None, self.voice)
        self._leg = TwimlLeg(parties, self, person, self.wiring, connect=self._connect,
                             hang_up=self.hung_up)
        self._task = asyncio.create_task(self._run(self._leg, document),
                                         name=f"twilio-inbound-{self.sid[:8]}")

    def hang_up(self) -> None:
        """`Status=completed` through the REST API."""
        self.hung_up.set()
        if self._leg is None:
            self._finish("api")

    # -- what the simulator tells it --------------------------------------------------

    def stream_ended(self, *, caller_hung_up: bool) -> None:
        """The simulator's media stream for this call ended: the caller hung up (the call
        is over), or the service closed it (the TwiML goes on past its `<Connect>`, and
        with none running, the call is over)."""
        if caller_hung_up:
            self._caller_gone = True
            if self._leg is not None:
                self._leg.end("caller")
            else:
                self._finish("caller")
        elif self._leg is None:
            self._finish("agent")
        self._stream_over.set()

    def take_reconnect(self) -> tuple[str, dict[str, str]] | None:
        """The stream to open, once, for a `<Connect><Stream>` still running (None when
        newer TwiML has replaced it); the call then counts as not redirected."""
        target = self.reconnect
        self.reconnect = None
        self.reconnected.clear()
        if target is not None:
            self.redirected.clear()
        return target

    async def close(self) -> None:
        """Cut the call off, as the stand-in stops."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._finish("api")

    # -- inside -------------------------------------------------------------------------

    async def _run(self, leg: TwimlLeg, document: Document) -> None:
        try:
            await leg.run(document)
        finally:
            self._finish(self.ended_by or "agent")

    async def _connect(self, text: str, stream: ET.Element) -> bool:
        url = stream.get("url", "")
        parameters = {p.get("name", ""): p.get("value", "")
                      for p in stream.findall("Parameter") if p.get("name")}
        self._stream_over.clear()
        self.reconnect = (url, parameters)
        self.reconnected.set()
        await self._stream_over.wait()
        if self._caller_gone:
            self.ended_by = "caller"
            return False
        return True

    def _finish(self, ended_by: str) -> None:
        if self.finished.is_set():
            return
        now = datetime.now(UTC)
        self.ended_by = self.ended_by or ended_by
        self.resource.update(status="completed", end_time=rfc2822(now), date_updated=rfc2822(now),
                             duration=str(max(0, round((now - self._answered_at).total_seconds()))))
        self.finished.set()
