"""Who answers a call the service places through the Twilio stand-in, and how the call
goes from there, as Twilio runs it.

A callee is one of: a person (a persona or a call script, played on the media stream with
the simulator's own audio leg), an operator (a member of staff the service hands a
caller to: hears every `<Say>`, goes into the conference the TwiML dials, says its lines
there and hangs up after `stay_s`), someone who declines (hears the start of the first
`<Say>` and hangs up), a voicemail, a busy line, a phone nobody answers, or a number that
cannot be reached. `PlacedCallRun` takes a call the REST API accepted and plays it out in
the background: the progress events the call asked for, each posted to its status
callback and signed with the account's auth token; on an answer, the inline `Twiml`, or
the TwiML URL requested (with `AnsweredBy` when machine detection was asked for), run
verb by verb (simulator/twiml_run.py), with `<Connect><Stream>` opened exactly as Twilio
opens it and the person played on it. New TwiML given through the REST API replaces what
runs. What the callee heard and said is kept in a `CalleeOutcome`.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args
from urllib.parse import urlsplit, urlunsplit

import httpx
from loguru import logger
from twilio.request_validator import RequestValidator

from simulator.caller_audio import (
    AGENT_QUIET_S,
    SAMPLE_RATE,
    AudioOutcome,
    Caller,
    CallerLine,
    LineCue,
    ScriptedCaller,
)
from simulator.leg_people import ConferencePerson, Decliner, LegPerson, Voice
from simulator.media_fork import ForkRecord
from simulator.personas.caller import RuleCaller
from simulator.personas.model import PersonaError, load_persona
from simulator.personas.run import PersonaCaller, RuleResponder, espeak_voice
from simulator.simulator import (
    HTTP_TIMEOUT_S,
    CallParties,
    CallTimeline,
    ClientEvent,
    Listener,
    ScriptError,
    SimulationError,
    Synthesizer,
    call_params,
    caller_lines,
    load_script,
    parse_stream_twiml,
    run_leg,
    signed_upgrade,
)
from simulator.twilio_wire import deliver, rfc2822, webhook_tls
from simulator.twiml_run import Document, LegWiring, TwimlLeg

CalleeKind = Literal["person", "operator", "decline", "voicemail", "busy", "no_answer", "fail"]
CALLEE_KINDS: tuple[str, ...] = get_args(CalleeKind)
# Callees who answer as people (machine detection: `human`).
PEOPLE = frozenset({"person", "operator", "decline"})
# How long an operator stays in the conference once its lines are said.
OPERATOR_STAY_S = 3.0
T = TypeVar("T")


class CalleeError(ValueError):
    """A callee could not be set up from what was given; the message says why."""


# How a person on an outbound call hears the agent's words, given the service's base URL
# (the origin of the call's TwiML URL): e.g. the service's observer feed.
Hearing = Callable[[str], Listener]


@dataclass(frozen=True)
class Callee:
    """Who answers a number. `caller` (a person): a fresh caller for each call;
    `hearing`: how they hear the agent (without it, they answer hearing nothing).
    An operator's `lines` (said once in the conference, voiced by `voice`: text → PCM16
    at 8 kHz, eSpeak NG when None) and `stay_s` (how long it then stays; None: until the
    conference ends)."""

    kind: CalleeKind
    caller: Callable[[], Awaitable[Caller]] | None = None
    hearing: Hearing | None = None
    name: str = ""
    lines: tuple[str, ...] = ()
    stay_s: float | None = OPERATOR_STAY_S
    voice: Voice | None = None

    def __post_init__(self) -> None:
        if self.kind not in CALLEE_KINDS:
            raise CalleeError(f"a callee is one of {', '.join(CALLEE_KINDS)}, not {self.kind!r}")
        if (self.kind == "person") != (self.caller is not None):
            raise CalleeError("a person callee needs a caller; other callees take none")
        if self.lines and self.kind != "operator":
            raise CalleeError("only an operator callee says lines in a conference")

    def leg_person(self) -> LegPerson:
        """Who meets the TwiML the call runs outside a media stream."""
        if self.kind == "decline":
            return Decliner()
        if self.kind == "operator":
            return ConferencePerson(self.lines, self.stay_s, self.voice)
        return ConferencePerson()  # put into a conference, they stay until it ends


def script_callee(script_path: str | Path, *, synthesize: Synthesizer | None = None,
                  hearing: Hearing | None = None) -> Callee:
    """A person who says a call script's lines (voiced before each call)."""
    try:
        script = load_script(script_path)
    except ScriptError as error:
        raise CalleeError(str(error)) from error

    async def caller() -> Caller:
        lines = await caller_lines(script, synthesize, text_mode=False)
        return ScriptedCaller(lines, script.hangup_after_s)

    return Callee("person", caller, hearing, name=script.name or Path(script_path).stem)


def persona_callee(persona_path: str | Path, *, voice: Callable[[str], Awaitable[bytes]] | None
                   = None, hearing: Hearing | None = None) -> Callee:
    """A person played by a persona's rules (voiced line by line with eSpeak NG unless
    `voice` is given)."""
    try:
        persona = load_persona(persona_path)
    except PersonaError as error:
        raise CalleeError(str(error)) from error

    async def caller() -> Caller:
        return PersonaCaller(persona, RuleResponder(RuleCaller(persona)),
                             voice=voice or espeak_voice)

    return Callee("person", caller, hearing, name=persona.name)


def person_callee(path: str | Path, *, synthesize: Synthesizer | None = None,
                  hearing: Hearing | None = None) -> Callee:
    """A person from a persona file, else from a call script (whichever the file is)."""
    try:
        return persona_callee(path, hearing=hearing, voice=_line_voice(synthesize))
    except CalleeError as as_persona:
        try:
            return script_callee(path, synthesize=synthesize, hearing=hearing)
        except CalleeError as as_script:
            raise CalleeError(f"{path} is neither a persona ({as_persona}) nor a call "
                              f"script ({as_script})") from as_script


def operator_callee(lines: Sequence[str] = (), *, stay_s: float | None = OPERATOR_STAY_S,
                    synthesize: Synthesizer | None = None, name: str = "operator") -> Callee:
    """A member of staff who takes a handed-off caller: hears the summary, joins the
    conference, says `lines` once it has started, stays `stay_s` (None: until it ends)."""
    return Callee("operator", name=name, lines=tuple(lines), stay_s=stay_s,
                  voice=_line_voice(synthesize))


def operator_script_callee(script_path: str | Path, *, stay_s: float | None = OPERATOR_STAY_S,
                           synthesize: Synthesizer | None = None) -> Callee:
    """An operator who says a call script's lines in the conference."""
    try:
        script = load_script(script_path)
    except ScriptError as error:
        raise CalleeError(str(error)) from error
    return operator_callee([turn.say for turn in script.turns], stay_s=stay_s,
                           synthesize=synthesize, name=script.name or Path(script_path).stem)


def _line_voice(synthesize: Synthesizer | None) -> Callable[[str], Awaitable[bytes]] | None:
    if synthesize is None:
        return None

    async def voice(text: str) -> bytes:
        return await synthesize(text, SAMPLE_RATE)

    return voice


def parse_callee(spec: str, *, synthesize: Synthesizer | None = None,
                 hearing: Hearing | None = None) -> Callee:
    """`voicemail`, `busy`, `no_answer`, `fail`, `decline`, `person:FILE` (a persona or a
    script), or `operator` / `operator:FILE` (a call script whose lines it says)."""
    kind, _, path = spec.partition(":")
    if kind == "person":
        if not path:
            raise CalleeError("a person callee names its persona or script: person:FILE.yaml")
        return person_callee(path, synthesize=synthesize, hearing=hearing)
    if kind == "operator":
        if path:
            return operator_script_callee(path, synthesize=synthesize)
        return operator_callee(synthesize=synthesize)
    if path:
        raise CalleeError(f"a {kind} callee takes no file")
    return Callee(kind)  # type: ignore[arg-type]  # checked in __post_init__


# -- What happened ----------------------------------------------------------------


@dataclass
class CalleeOutcome:
    """The callee's side of a placed call: what the service answered and what was said.
    `ended_by`: `callee`, `agent` (the service closed the stream or hung up in TwiML), or
    `api` (hung up through the REST API). `said`: every `<Say>` played on the call;
    `heard`: what the callee heard of them, and of a conference ("hold", "beep"), or
    Twilio's error message; `spoken`: an operator's lines in the conference;
    `conferences`: the names it entered; `forks`: its `<Start><Stream>`s; `documents`:
    every TwiML it ran; `error_code`: Twilio's (12100, 11200) when the TwiML failed."""

    kind: str
    answered_by: str | None = None
    twiml: str = ""
    said: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    spoken: list[str] = field(default_factory=list)
    conferences: list[str] = field(default_factory=list)
    forks: list[ForkRecord] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    stream_url: str | None = None
    stream_parameters: dict[str, str] = field(default_factory=dict)
    callee_said: list[str] = field(default_factory=list)
    agent_said: list[str] = field(default_factory=list)  # as the person heard it
    agent_speech_s: float = 0.0
    ended_by: str | None = None
    error: str | None = None
    error_code: int | None = None
    timeline: list[ClientEvent] = field(default_factory=list)


@dataclass(frozen=True)
class CallTiming:
    """How long a placed call takes: ringing before an answer, ringing before nobody
    answers, the longest message a voicemail records from a media stream, the quiet
    after which a person on the stream takes the agent to be done, and how long `<Say>`
    and `<Pause>` take against real time (words / 2.5 s, `length` s: 1.0 is real time)."""

    ring_s: float = 0.0
    no_answer_s: float = 0.2
    voicemail_s: float = 5.0
    person_quiet_s: float = AGENT_QUIET_S
    speech_scale: float = 1.0


@dataclass
class PlacedCallState:
    """One call the REST API accepted: its resource (Twilio's JSON, updated as it goes)
    and the request that placed it."""

    resource: dict[str, Any]
    request: dict[str, list[str]]
    callee: Callee
    outcome: CalleeOutcome
    hang_up: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    sequence: int = 0
    answered_at: float | None = None
    leg: TwimlLeg | None = None  # the TwiML it runs, once answered

    def param(self, name: str, default: str = "") -> str:
        values = self.request.get(name) or []
        return values[-1] if values else default

    @property
    def sid(self) -> str:
        return str(self.resource["sid"])

    @property
    def ended(self) -> bool:
        return self.resource["status"] in ENDED

    def give(self, document: Document) -> None:
        """New TwiML through the REST API (`Twiml=` or `Url=`): it replaces what the call
        runs, or, not answered yet, what it will run once answered."""
        if self.leg is not None:
            self.leg.redirect(document)
            return
        for name in ("Twiml", "Url", "Method"):
            self.request.pop(name, None)
        if isinstance(document, str):
            self.request["Twiml"] = [document]
        else:
            self.request.update(Url=[document.url], Method=[document.method])

    def events(self) -> set[str]:
        """The progress events the call asked for (Twilio's default: completed only)."""
        asked = [word for value in self.request.get("StatusCallbackEvent", [])
                 for word in value.split()]
        return {word.lower() for word in asked} or {"completed"}

    def set_status(self, status: str) -> None:
        """Move the resource on; an ended call stays as it ended."""
        if self.ended:
            return
        now = datetime.now(UTC)
        self.resource["status"] = status
        self.resource["date_updated"] = rfc2822(now)
        if status in ENDED:
            self.resource["end_time"] = rfc2822(now)
            self.resource["duration"] = str(self.duration_s())

    def duration_s(self) -> int:
        if self.answered_at is None:
            return 0
        return max(0, round(asyncio.get_running_loop().time() - self.answered_at))


ENDED = {"completed", "busy", "no-answer", "failed", "canceled"}
# The status callback's event for each status a call reaches.
EVENT_OF = {"initiated": "initiated", "ringing": "ringing", "in-progress": "answered"}


def hang_up_status(state: PlacedCallState) -> str:
    """What hanging up through the API makes of the call: a call not answered yet is
    canceled, an answered one completed."""
    return "completed" if state.resource["status"] == "in-progress" else "canceled"


# -- Playing the call out -----------------------------------------------------------


class PlacedCallRun:
    """Runs one placed call the way Twilio does (see the module docstring)."""

    def __init__(self, state: PlacedCallState, *, wiring: LegWiring, timing: CallTiming,
                 log: Callable[[str], None]) -> None:
        self._state = state
        self._person: Caller | None = None
        self._wiring = wiring
        self._token = wiring.auth_token
        self._validator = RequestValidator(wiring.auth_token)
        self._timing = timing
        self._sent = wiring.sent
        self._log = log
        resource = state.resource
        self._parties = CallParties(
            call_sid=state.sid, account_sid=resource["account_sid"],
            stream_sid="MZ" + state.sid[2:], from_number=resource["from"],
            to_number=resource["to"], direction="outbound-api")

    async def run(self) -> None:
        state = self._state
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, verify=webhook_tls()) as http:
                self._http = http
                await self._play(state.callee.kind)
                if not state.ended:
                    state.set_status("completed")
                await self._progress_callback(self._state.resource["status"])
        except Exception as error:  # noqa: BLE001 - a stand-in failure must show in tests
            logger.exception("twilio stand-in: a placed call failed")
            state.outcome.error = state.outcome.error or f"{type(error).__name__}: {error}"
            state.set_status("failed")
        finally:
            state.done.set()

    async def _play(self, kind: str) -> None:
        state = self._state
        state.resource["start_time"] = rfc2822(datetime.now(UTC))
        await self._progress_callback("initiated")
        if kind == "fail":
            state.set_status("failed")
            return
        if kind == "busy":
            state.set_status("busy")
            return
        state.set_status("ringing")
        await self._progress_callback("ringing")
        if kind == "person" and not await self._person_ready():
            state.set_status("failed")
            return
        if kind == "no_answer":
            rang_out = await self._until_hung_up(asyncio.sleep(self._timing.no_answer_s))
            state.set_status("no-answer" if rang_out is not None else hang_up_status(state))
            return
        if await self._until_hung_up(asyncio.sleep(self._timing.ring_s)) is None:
            state.set_status(hang_up_status(state))
            return
        state.answered_at = asyncio.get_running_loop().time()
        state.set_status("in-progress")
        await self._progress_callback("in-progress")
        state.outcome.answered_by = self._answered_by(kind)
        if state.outcome.answered_by is not None:
            state.resource["answered_by"] = state.outcome.answered_by
        twiml = await self._twiml()
        if twiml is not None and not state.hang_up.is_set():
            state.leg = TwimlLeg(self._parties, state.outcome, state.callee.leg_person(),
                                 self._wiring, connect=self._connect, hang_up=state.hang_up)
            await state.leg.run(twiml)
        if state.hang_up.is_set():
            state.outcome.ended_by = state.outcome.ended_by or "api"

    async def _person_ready(self) -> bool:
        """The person's caller, voiced while the phone rings (False: it cannot speak)."""
        try:
            self._person = _Recorded(await self._state.callee.caller(), self._state.outcome)
        except SimulationError as error:
            self._state.outcome.error = str(error)
            return False
        return True

    def _answered_by(self, kind: str) -> str | None:
        """Twilio's verdict for the callee, when machine detection was asked for."""
        detection = self._state.param("MachineDetection")
        if not detection:
            return None
        if kind in PEOPLE:
            return "human"
        return "machine_end_beep" if detection == "DetectMessageEnd" else "machine_start"

    async def _until_hung_up(self, work: Awaitable[T]) -> tuple[T] | None:
        """`work`'s result (in a 1-tuple), or None when the call was hung up through the API
        first (the work is then cancelled)."""
        task = asyncio.ensure_future(work)
        hung_up = asyncio.ensure_future(self._state.hang_up.wait())
        try:
            await asyncio.wait({task, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hung_up.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        return None if task.cancelled() else (task.result(),)

    # -- the webhooks ---------------------------------------------------------------

    async def _progress_callback(self, status: str) -> None:
        """The status callback for reaching `status`, if the call asked for that event."""
        state = self._state
        url = state.param("StatusCallback")
        event = EVENT_OF.get(status, "completed")
        if not url or event not in state.events():
            return
        params = {**call_params(self._parties), "CallStatus": status,
                  "CallbackSource": "call-progress-events",
                  "SequenceNumber": str(state.sequence),
                  "Timestamp": rfc2822(datetime.now(UTC))}
        state.sequence += 1
        if event == "completed":
            params["CallDuration"] = str(state.resource["duration"] or 0)
        if state.outcome.answered_by is not None and event == "completed":
            params["AnsweredBy"] = state.outcome.answered_by
        await self._send("status", url, params, state.param("StatusCallbackMethod", "POST"))

    async def _twiml(self) -> str | None:
        """The answer's TwiML: the inline `Twiml`, else what the `Url` answers (None: the
        URL failed, Twilio's 11200, and the call ends)."""
        state = self._state
        inline = state.param("Twiml")
        if inline:
            state.outcome.twiml = inline
            return inline
        params = {**call_params(self._parties), "CallStatus": "in-progress"}
        if state.outcome.answered_by is not None:
            params["AnsweredBy"] = state.outcome.answered_by
            params["MachineDetectionDuration"] = "1200"
        response = await self._send("voice", state.param("Url"), params,
                                    state.param("Method", "POST"))
        if response is None or response.status_code >= 300:
            got = "no answer" if response is None else f"HTTP {response.status_code}"
            state.outcome.error = f"the TwiML URL gave {got}"
            state.outcome.error_code = 11200
            return None
        state.outcome.twiml = response.text
        return response.text

    async def _send(self, kind: str, url: str, params: dict[str, str],
                    method: str) -> httpx.Response | None:
        return await deliver(self._http, self._validator, self._sent, kind=kind,
                             call_sid=self._state.sid, url=url, params=params, method=method)

    # -- the answer -----------------------------------------------------------------

    async def _connect(self, twiml: str, stream: ET.Element) -> bool:
        """The TwiML's `<Connect><Stream>`: the callee on it; whether the call goes on
        after it (the service closed it, or it could not be opened)."""
        await self._stream(twiml, self._state.callee.kind)
        return self._state.outcome.ended_by != "callee" and not self._state.hang_up.is_set()

    async def _stream(self, twiml: str, kind: str) -> None:
        """Open the `<Stream>` as Twilio does and play the callee on it."""
        outcome = self._state.outcome
        try:
            target = parse_stream_twiml(twiml)
        except SimulationError as error:
            outcome.error = str(error)
            return
        outcome.stream_url, outcome.stream_parameters = target.url, dict(target.parameters)
        timeline = CallTimeline(self._log)
        # a voicemail records what it hears until the agent hangs up or it is full
        caller: Caller = self._person or _Listening(self._timing.voicemail_s)
        try:
            async with AsyncExitStack() as stack:
                words = None
                hearing = self._state.callee.hearing
                if kind == "person" and hearing is not None:
                    listen = hearing(_origin(self._state.param("Url") or target.url))
                    words = await stack.enter_async_context(listen(target.call_id, timeline))
                signed = signed_upgrade(self._token, target.url)
                leg = run_leg(target.url, self._parties, target, timeline, caller, False,
                              self._timing.person_quiet_s, words, signed)
                ran = await self._until_hung_up(leg)
        except SimulationError as error:
            outcome.error = str(error)
            return
        finally:
            outcome.timeline = list(timeline.events)
        if ran is None:
            return
        (leg_outcome,) = ran
        if isinstance(leg_outcome, AudioOutcome):
            outcome.ended_by = "agent" if leg_outcome.ended_by == "agent" else "callee"
            outcome.agent_speech_s = round(sum(s.end_s - s.start_s
                                               for s in leg_outcome.agent_speech), 2)


def _origin(url: str) -> str:
    """The service's base URL as the call's TwiML URL names it."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, "", "", ""))


class _Recorded:
    """A person's caller, with what they said and heard kept in the outcome."""

    def __init__(self, caller: Caller, outcome: CalleeOutcome) -> None:
        self._caller = caller
        self._outcome = outcome
        self.hangup_after_s = caller.hangup_after_s

    def next_cue(self) -> LineCue | None:
        return self._caller.next_cue()

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None:
        self._outcome.agent_said.extend(heard)
        line = await self._caller.next_line(number, heard)
        if line is not None:
            self._outcome.callee_said.append(line.text)
        return line


class _Listening:
    """A voicemail on the stream: says nothing, hangs up once full."""

    def __init__(self, seconds: float) -> None:
        self.hangup_after_s = seconds

    def next_cue(self) -> LineCue | None:
        return None

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None:
        return None
