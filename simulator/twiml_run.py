"""The TwiML a call leg runs, verb by verb, as Twilio runs it (twilio.com/docs/voice/twiml).

A leg runs one document at a time. Giving the call new TwiML (the REST API's `Twiml=` or
`Url=` on the call) stops the document running (a `<Dial>` in progress leaves its
conference) and runs the new one; hanging the call up stops everything. When a document
runs out the call ends, as Twilio hangs up. Forks (`<Start><Stream>`) belong to the call,
not the document: they outlive a redirect and stop when the call ends.

Verbs: `<Say>` (heard by the leg's person, taking words / 2.5 s, `loop` times, 0 being
until the call moves on), `<Pause length>` (1 s by default), `<Start><Stream>` (a fork:
simulator/media_fork.py), `<Stop><Stream name>`, `<Dial><Conference>` (simulator/
twilio_conference.py: blocks until the leg leaves or the conference ends; with `action`,
that URL's TwiML goes on instead of the next verb), `<Connect><Stream>` (handed to the
caller of the leg: the placed call's person, or the simulator's inbound caller), and
`<Hangup/>`. `<Say>` and `<Pause>` take their time times `speech_scale`.

Errors as Twilio reports them: a document that is not XML, not a `<Response>`, or holds a
verb Twilio does not know is 12100 "Document parse failure"; a TwiML URL that cannot be
fetched is 11200 "HTTP retrieval failure"; either way the person hears Twilio's
application-error message and the call ends. A verb Twilio knows that this stand-in does
not play (`<Play>`, `<Gather>`, `<Redirect>`, a `<Dial>` to anything but a conference...)
is named in the leg's `error` and ends the call.
"""

from __future__ import annotations

import asyncio
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import httpx
from twilio.request_validator import RequestValidator

from simulator.caller_audio import StreamIdentity
from simulator.leg_people import LegPerson
from simulator.media_fork import ForkedStream, ForkRecord, Mouth
from simulator.simulator import HTTP_TIMEOUT_S, CallParties, SimulationError, call_params
from simulator.twilio_conference import ConferenceBridge, ConferenceOptions
from simulator.twilio_wire import Sent, deliver, webhook_tls

WORDS_PER_S = 2.5
APPLICATION_ERROR = "We are sorry, an application error has occurred. Goodbye."
# Verbs Twilio plays that this stand-in does not.
UNPLAYED = frozenset({"Play", "Gather", "Record", "Redirect", "Reject", "Enqueue", "Leave",
                      "Refer", "Sms", "Echo", "Pay", "Prompt", "Queue"})
# (ReasonParticipantLeft, ParticipantCallStatus) as a leg leaves a conference.
HUNG_UP = ("participant_hung_up", "completed")
UPDATED = ("participant_updated_via_api", "in-progress")


@dataclass(frozen=True)
class UrlDocument:
    """TwiML to be fetched: a call updated with `Url=`, or a `<Dial action>`."""

    url: str
    method: str = "POST"
    params: dict[str, str] = field(default_factory=dict)


Document = str | UrlDocument
# The leg's `<Connect><Stream>`: (the document, its <Stream>) → whether the call goes on
# once the stream has ended (False: it is over, the record says how).
ConnectStream = Callable[[str, ET.Element], Awaitable[bool]]


class LegRecord(Protocol):
    """Where a leg keeps what happened on it (a placed call's CalleeOutcome, an
    InboundLeg): `said` every `<Say>` played, `heard` what the person heard (a cut-off
    `<Say>`, "hold", "beep", Twilio's error message), `spoken` what the person said
    outside a media stream, `conferences` the names it entered, `forks`, `documents`
    every TwiML it ran."""

    said: list[str]
    heard: list[str]
    spoken: list[str]
    conferences: list[str]
    forks: list[ForkRecord]
    documents: list[str]
    error: str | None
    error_code: int | None
    ended_by: str | None


@dataclass(frozen=True)
class LegWiring:
    """What a leg uses of the stand-in's account: its conferences, its auth token (to
    sign), where webhooks are kept, and how fast `<Say>` and `<Pause>` go."""

    bridge: ConferenceBridge
    auth_token: str
    sent: list[Sent]
    speech_scale: float = 1.0


class _CallOver(Exception):
    """The call ends here; `ended_by` says who ended it."""

    def __init__(self, ended_by: str) -> None:
        super().__init__(ended_by)
        self.ended_by = ended_by


class TwimlLeg:
    """Runs TwiML on one call until the call ends (see the module docstring)."""

    def __init__(self, parties: CallParties, record: LegRecord, person: LegPerson,
                 wiring: LegWiring, *, connect: ConnectStream,
                 hang_up: asyncio.Event | None = None) -> None:
        self._parties = parties
        self._record = record
        self._person = person
        self._wiring = wiring
        self._connect = connect
        self._hang_up = hang_up or asyncio.Event()
        self._validator = RequestValidator(wiring.auth_token)
        self._mouth = Mouth(record.spoken)
        self._redirects: list[Document] = []
        self._redirected = asyncio.Event()
        self._ended = asyncio.Event()
        self._ended_by = "api"
        self._leave_as = HUNG_UP
        self._http: httpx.AsyncClient | None = None

    def redirect(self, document: Document) -> None:
        """New TwiML for the call: it replaces the document running."""
        self._redirects.append(document)
        self._redirected.set()

    def end(self, ended_by: str) -> None:
        """The call is over from outside the TwiML (`ended_by`: `caller`, `api`...)."""
        if not self._ended.is_set():
            self._ended_by = ended_by
            self._ended.set()

    async def run(self, document: Document) -> None:
        """Run `document`, then whatever the call is redirected to, until it ends."""
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, verify=webhook_tls()) as http:
                self._http = http
                await self._documents(document)
        finally:
            for fork in self._mouth.forks:
                await fork.stop("call")

    async def _documents(self, document: Document) -> None:
        while True:
            running = asyncio.create_task(self._execute(document))
            stops = [asyncio.create_task(event.wait())
                     for event in (self._redirected, self._ended, self._hang_up)]
            await asyncio.wait({running, *stops}, return_when=asyncio.FIRST_COMPLETED)
            for stop in stops:
                stop.cancel()
            if running.done():
                self._record.ended_by = self._ended_by_of(running)
                return
            over = self._ended.is_set() or self._hang_up.is_set()
            self._leave_as = HUNG_UP if over else UPDATED
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            if over:
                self._record.ended_by = "api" if self._hang_up.is_set() else self._ended_by
                return
            document = self._redirects[-1]
            self._redirects.clear()
            self._redirected.clear()
            self._leave_as = HUNG_UP

    def _ended_by_of(self, running: asyncio.Task[None]) -> str:
        """Who ended the call, from how its last document finished."""
        error = running.exception()
        if error is None:
            return "agent"  # the TwiML ran out: Twilio hangs up
        if isinstance(error, _CallOver):
            return error.ended_by
        if isinstance(error, SimulationError):
            self._record.error = str(error)
            return "callee"
        raise error

    # -- one document -------------------------------------------------------------------

    async def _execute(self, document: Document | None) -> None:
        while document is not None:
            text = document if isinstance(document, str) else await self._fetch(document)
            self._record.documents.append(text)
            document = await self._verbs(self._parse(text), text)

    def _parse(self, text: str) -> ET.Element:
        try:
            root = ET.fromstring(text)
        except ET.ParseError as error:
            raise self._application_error(12100, "Document parse failure",
                                          f"not well-formed XML ({error})") from error
        if root.tag != "Response":
            raise self._application_error(12100, "Document parse failure",
                                          f"the root is <{root.tag}>, not <Response>")
        return root

    async def _verbs(self, root: ET.Element, text: str) -> Document | None:
        """Play each verb in turn; a `<Dial action>`'s document to go on with, if any."""
        for verb in root:
            if verb.tag == "Say":
                await self._say(verb)
            elif verb.tag == "Pause":
                await self._sleep(_number(verb.get("length"), 1.0))
            elif verb.tag == "Start":
                self._start(verb)
            elif verb.tag == "Stop":
                await self._stop(verb)
            elif verb.tag == "Dial":
                action = await self._dial(verb)
                if action is not None:
                    return action
            elif verb.tag == "Connect":
                await self._connect_stream(verb, text)
            elif verb.tag == "Hangup":
                raise _CallOver("agent")
            elif verb.tag in UNPLAYED:
                raise self._unplayed(f"<{verb.tag}>")
            else:
                raise self._application_error(12100, "Document parse failure",
                                              f"unknown verb <{verb.tag}>")
        return None

    # -- the verbs ----------------------------------------------------------------------

    async def _say(self, verb: ET.Element) -> None:
        text = " ".join((verb.text or "").split())
        words = text.split()
        if not words:
            return
        seconds = len(words) / WORDS_PER_S * self._wiring.speech_scale
        loops = int(_number(verb.get("loop"), 1.0))
        played = 0
        while loops == 0 or played < loops:
            played += 1
            self._record.said.append(text)
            cut_at = self._person.listens_s(seconds)
            if cut_at is not None and cut_at < seconds:
                await asyncio.sleep(cut_at)
                heard = max(1, int(len(words) * cut_at / seconds))
                self._record.heard.append(" ".join(words[:heard]))
                raise _CallOver("callee")
            self._record.heard.append(text)
            await asyncio.sleep(seconds)

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self._wiring.speech_scale)

    def _start(self, verb: ET.Element) -> None:
        for noun in verb:
            if noun.tag != "Stream":
                raise self._unplayed(f"<Start><{noun.tag}>")
            url = noun.get("url")
            if not url:
                raise self._application_error(12100, "Document parse failure",
                                              "a <Stream> without a url")
            parameters = {p.get("name", ""): p.get("value", "")
                          for p in noun.findall("Parameter") if p.get("name")}
            record = ForkRecord(url, noun.get("name"), noun.get("track", "inbound_track"),
                                parameters, "MZ" + secrets.token_hex(16))
            self._record.forks.append(record)
            identity = StreamIdentity(self._parties.account_sid, self._parties.call_sid,
                                      record.stream_sid, parameters)
            fork = ForkedStream(record, identity, self._wiring.auth_token)
            self._mouth.forks.append(fork)
            fork.start()

    async def _stop(self, verb: ET.Element) -> None:
        for noun in verb.findall("Stream"):
            name = noun.get("name")
            for fork in self._mouth.forks:
                if name is None or fork.record.name == name:
                    await fork.stop("twiml")

    async def _dial(self, verb: ET.Element) -> Document | None:
        noun = verb.find("Conference")
        if noun is None:
            dialled = next((n.tag for n in verb), "a number")
            raise self._unplayed(f"<Dial> to {dialled}")
        if not self._person.joins_conferences():
            raise _CallOver("callee")
        loop = asyncio.get_running_loop()
        entered = loop.time()
        await self._conference(ConferenceOptions.of(noun))
        action = verb.get("action")
        if not action:
            return None
        return UrlDocument(action, verb.get("method", "POST").upper(), {
            "DialCallStatus": "completed",
            "DialCallDuration": str(round(loop.time() - entered))})

    async def _conference(self, options: ConferenceOptions) -> None:
        """In the conference until it ends (returns) or the person hangs up (the call is
        over); a redirect or a hang-up cancels it. Leaves the conference either way."""
        bridge, call_sid = self._wiring.bridge, self._parties.call_sid
        conference, participant = bridge.enter(options, call_sid, self._record.heard)
        self._record.conferences.append(options.name)
        person = asyncio.create_task(self._person.in_conference(conference, self._mouth))
        removed = asyncio.create_task(participant.removed.wait())
        try:
            await asyncio.wait({person, removed}, return_when=asyncio.FIRST_COMPLETED)
            if removed.done():
                return
            person.result()
            self._leave_as = HUNG_UP
            raise _CallOver("callee")
        finally:
            for task in (person, removed):
                task.cancel()
            await asyncio.gather(person, removed, return_exceptions=True)
            reason, status = self._leave_as
            bridge.leave(conference, call_sid, reason=reason, call_status=status)

    async def _connect_stream(self, verb: ET.Element, text: str) -> None:
        stream = verb.find("Stream")
        if stream is None:
            inside = next((n.tag for n in verb), "nothing")
            raise self._unplayed(f"<Connect><{inside}>")
        if not await self._connect(text, stream):
            raise _CallOver(self._record.ended_by or "callee")

    # -- fetching and failing -----------------------------------------------------------

    async def _fetch(self, document: UrlDocument) -> str:
        assert self._http is not None
        params = {**call_params(self._parties), "CallStatus": "in-progress", **document.params}
        response = await deliver(self._http, self._validator, self._wiring.sent, kind="voice",
                                 call_sid=self._parties.call_sid, url=document.url,
                                 params=params, method=document.method)
        if response is None or response.status_code >= 300:
            got = "no answer" if response is None else f"HTTP {response.status_code}"
            raise self._application_error(11200, "HTTP retrieval failure",
                                          f"{document.url} gave {got}")
        return response.text

    def _application_error(self, code: int, name: str, detail: str) -> _CallOver:
        """Twilio's notice for the call; the person hears its error message, then the call
        ends."""
        self._record.error_code = code
        self._record.error = f"{code} {name}: {detail}"
        self._record.heard.append(APPLICATION_ERROR)
        return _CallOver("agent")

    def _unplayed(self, what: str) -> _CallOver:
        self._record.error = f"the Twilio stand-in does not play {what}"
        return _CallOver("agent")


def _number(value: str | None, default: float) -> float:
    """A TwiML number attribute; a missing or malformed one is the default."""
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default
