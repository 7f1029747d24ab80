"""`python main.py simulate SCRIPT.yaml`: play a scripted caller against a running service.

The simulator is a client that behaves exactly like Twilio: it signs and posts the
voice webhook, opens the media stream the TwiML names, streams the caller's
synthesized voice as real-time μ-law (see `simulator/caller_audio.py`), hangs up
with a `stop`, posts the status callback, and reads the call record back through
the API. With `--text` the same call is typed instead, over Pipecat's eval/RTVI
path on the same `/ws`, so conversation logic can be checked in seconds without
any audio engine.

Sections: the script (pydantic, the file boundary), the client-side timeline,
the Twilio webhooks and the call record, the text leg, the result and its
transcript, `simulate_call` (with, for tests, the Twilio stand-in's view of the call:
the service may hand the caller off through the REST API), and the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import secrets
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import yaml
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from twilio.request_validator import RequestValidator
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from config import Settings
from lib import event_loop
from lib.redaction import mask_phone
from simulator.caller_audio import (
    AGENT_QUIET_S,
    BARGE_IN_DELAY_S,
    SAMPLE_RATE,
    AgentWords,
    AudioCallLeg,
    AudioOutcome,
    Caller,
    CallerLine,
    EndedBy,
    ScriptedCaller,
    SpeechSegment,
    StreamIdentity,
    encode_ulaw,
    split_frames,
)

# (text, sample rate, **voice) -> PCM16; `voice` is CallerVoice.synthesis() when a line has one.
Synthesizer = Callable[..., Awaitable[bytes]]
Log = Callable[[str], None]

HTTP_TIMEOUT_S = 10.0
WS_OPEN_TIMEOUT_S = 10.0
# The record is written off the call path; completion_reason lands shortly after hang-up.
RECORD_WAIT_S = 10.0
RECORD_POLL_S = 0.25
# The call's summary and quality score are written by its after-call job, soon after it
# ends; a server that analyses calls shows `analysis` as null until then.
ANALYSIS_WAIT_S = 30.0
# Text replies arrive in one burst; this much quiet after the LLM stops ends the turn.
TEXT_QUIET_S = 0.75
# A text agent that ends the call does so within milliseconds of its last reply.
TEXT_HANGUP_GRACE_S = 0.5
BOT_READY_TIMEOUT_S = 10.0
# The server closes a stream it will not serve (unknown call, no start) with this code.
POLICY_VIOLATION = 1008
E164 = r"^\+[1-9]\d{6,14}$"
# How long a caller handed off (on hold, in a conference) waits for the call to end or
# come back to the agent before hanging up.
HANDOFF_WAIT_S = 120.0


class SimulationError(Exception):
    """The call could not be simulated; the message is one line a person can act on."""


# -- The script --------------------------------------------------------------


class ScriptError(ValueError):
    """The script file is missing, not YAML, or does not follow the script model."""


class CallerVoice(BaseModel):
    """How the caller sounds on a line, on eSpeak NG's scales: an agitated caller speaks
    fast, loud and high (e.g. 230 wpm, pitch 80, range 90, volume 180); a calm one slowly,
    low and even."""

    model_config = ConfigDict(extra="forbid")

    words_per_minute: int = Field(default=165, ge=80, le=450)
    pitch: int = Field(default=50, ge=0, le=100)
    range: int = Field(default=50, ge=0, le=100, description="Pitch range: 0 is monotone.")
    volume: int = Field(default=100, ge=0, le=200, description="100 is eSpeak's normal.")

    def synthesis(self) -> dict[str, Any]:
        """Keyword arguments for the synthesizer (services.espeak.engine.synthesize_pcm)."""
        from services.espeak.engine import VoiceShape

        return {"words_per_minute": self.words_per_minute,
                "shape": VoiceShape(self.pitch, self.range, self.volume)}


class ScriptTurn(BaseModel):
    """One caller line and how the caller times it."""

    model_config = ConfigDict(extra="forbid")

    say: str = Field(min_length=1, description="What the caller says.")
    voice: CallerVoice | None = Field(
        default=None, description="How the caller sounds on this line (audio calls)."
    )
    pause_s: float = Field(
        default=0.6, ge=0, le=60,
        description="Silence before speaking, once the agent has finished.",
    )
    barge_in: bool = Field(
        default=False,
        description="Start speaking ~0.5 s after the agent starts talking instead of waiting.",
    )
    wait_s: float = Field(
        default=20.0, gt=0, le=600,
        description="Longest wait for the agent before this line; the line goes ahead then.",
    )


class EventExpectation(BaseModel):
    """An event the call record must hold: its type, and fields its data must match."""

    model_config = ConfigDict(extra="forbid")

    type: str
    data: dict[str, Any] = Field(default_factory=dict)

    def met_by(self, events: list[dict[str, Any]]) -> bool:
        return any(
            event.get("type") == self.type
            and all((event.get("data") or {}).get(k) == v for k, v in self.data.items())
            for event in events
        )

    def __str__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.data.items())
        return f"{self.type}({fields})"


class ScriptExpectation(BaseModel):
    """What the call record must show afterwards (checked by `simulate`; exit 1 if not)."""

    model_config = ConfigDict(extra="forbid")

    completion_reason: str | None = None
    final_state: str | None = None
    agent_says: list[str] = Field(
        default_factory=list, description="Phrases the agent says, in this order (any turns)."
    )
    tools_succeeded: list[str] = Field(default_factory=list)
    tools_never_succeeded: list[str] = Field(
        default_factory=list, description="Tools (writes) that must not have succeeded."
    )
    states: list[str] = Field(default_factory=list, description="States the call passed through.")
    events: list[EventExpectation] = Field(
        default_factory=list, description="Events the record holds (type and data fields)."
    )
    analysed: bool = Field(
        default=True, description="The call ends with its summary and quality score (a "
        "server that analyses calls; one whose record has no `analysis` field is not asked).")

    def failures(self, summary: dict[str, Any]) -> list[str]:
        """What the record does not show (empty: everything expected happened)."""
        problems = []
        for key in ("completion_reason", "final_state"):
            wanted = getattr(self, key)
            if wanted is not None and summary.get(key) != wanted:
                problems.append(f"{key} is {summary.get(key)!r}, expected {wanted!r}")
        said = " | ".join(t["text"] or "" for t in summary["turns"] if t["speaker_role"] == "agent")
        position = 0
        for phrase in self.agent_says:
            found = said.find(phrase, position)
            if found < 0:
                problems.append(f"the agent never said {phrase!r} (after what came before)")
            else:
                position = found + len(phrase)
        ok = {t["name"] for t in summary["tool_calls"] if t["succeeded"]}
        problems += [f"{name} did not succeed" for name in self.tools_succeeded if name not in ok]
        problems += [f"{name} succeeded" for name in self.tools_never_succeeded if name in ok]
        visited = {t["next_state"] for t in summary["transitions"]}
        problems += [f"never reached {state}" for state in self.states if state not in visited]
        events = summary.get("events") or []
        problems += [f"no event {wanted}" for wanted in self.events if not wanted.met_by(events)]
        if self.analysed and "analysis" in summary and summary["analysis"] is None:
            problems.append("no summary or quality score was written for the call")
        return problems


class CallScript(BaseModel):
    """A caller: who calls whom, what they say, and whether they hang up early."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None = None
    from_number: str = Field(alias="from", pattern=E164)
    to_number: str = Field(alias="to", pattern=E164)
    turns: list[ScriptTurn] = Field(min_length=1)
    hangup_after_s: float | None = Field(
        default=None, ge=0,
        description="Hang up this long after the last line, without waiting for the agent.",
    )
    expect: ScriptExpectation | None = None

    @field_validator("from_number", "to_number", mode="before")
    @classmethod
    def _quoted_number(cls, value: object) -> object:
        return quoted_phone_number(value)


def quoted_phone_number(value: object) -> object:
    """YAML reads an unquoted +1555… as an integer and drops the plus: say so."""
    if isinstance(value, int) and not isinstance(value, bool):
        # pydantic reports ValueError (not TypeError) as a validation error
        raise ValueError('write phone numbers in quotes, e.g. "+15550100100"')  # noqa: TRY004
    return value


def error_location(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as a file path reader writes it: turns[2].say."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "script"


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_yaml_model(path: str | Path, model: type[ModelT], *, kind: str, shape: str,
                    error: type[ValueError]) -> ModelT:
    """Read a YAML file of `kind` (script, persona) into `model`; `error` names the file and
    every bad key, a file that is unreadable, not YAML, or not a mapping of `shape`."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as failure:
        raise error(f"cannot read {kind} {path}: {failure.strerror}") from failure
    except yaml.YAMLError as failure:
        said = str(failure).replace("\n", " ")
        raise error(f"{kind} {path} is not valid YAML: {said}") from failure
    if not isinstance(data, dict):
        raise error(f"{kind} {path} must be a mapping with {shape}")
    try:
        return model.model_validate(data)
    except ValidationError as failure:
        problems = "; ".join(
            f"{error_location(err['loc'])}: {err['msg']}" for err in failure.errors()
        )
        raise error(f"{kind} {path}: {problems}") from failure


def load_script(path: str | Path) -> CallScript:
    """Read and validate a script file; ScriptError names every bad key."""
    return load_yaml_model(path, CallScript, kind="script", shape="from, to and turns",
                           error=ScriptError)


# -- What the caller saw, on the call's clock ------------------------------------


@dataclass(frozen=True)
class ClientEvent:
    """Something the simulated caller noticed, in seconds since the stream opened."""

    at_s: float
    kind: str
    detail: str = ""


class CallTimeline:
    """The client-side log of a call; also echoed live through `log`."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._t0 = time.monotonic()
        self._wall_t0 = time.time()
        self.events: list[ClientEvent] = []

    def restart(self) -> None:
        """Time zero is when the media stream opens, as in the server's record."""
        self._t0 = time.monotonic()
        self._wall_t0 = time.time()

    def at_wall(self, at_s: float) -> float:
        """A moment of the call as wall-clock time (what a server's event stamps carry)."""
        return self._wall_t0 + at_s

    def now(self) -> float:
        return time.monotonic() - self._t0

    def note(self, kind: str, detail: str = "", at_s: float | None = None) -> None:
        event = ClientEvent(round(self.now() if at_s is None else at_s, 3), kind, detail)
        self.events.append(event)
        said = f": {detail}" if detail else ""
        self._log(f"[{event.at_s:7.2f}s] {kind.replace('_', ' ')}{said}")


# -- Twilio's webhooks and the call record -------------------------------------


def _sid(prefix: str) -> str:
    return prefix + secrets.token_hex(16)


@dataclass(frozen=True)
class CallParties:
    """The identifiers of one simulated Twilio call. `direction`: Twilio's word for who
    dialled (`inbound` to the service's number, `outbound-api` placed through the API)."""

    call_sid: str
    account_sid: str
    stream_sid: str
    from_number: str
    to_number: str
    direction: str = "inbound"

    @classmethod
    def new(cls, from_number: str, to_number: str, account_sid: str | None = None) -> CallParties:
        """Fresh Twilio-style SIDs for one call between these numbers."""
        return cls(
            call_sid=_sid("CA"), account_sid=account_sid or _sid("AC"), stream_sid=_sid("MZ"),
            from_number=from_number, to_number=to_number,
        )


@dataclass(frozen=True)
class StreamTarget:
    """What the TwiML answer says to connect to."""

    url: str
    parameters: dict[str, str]

    @property
    def call_id(self) -> str:
        return self.parameters["call_id"]


def parse_stream_twiml(xml_text: str) -> StreamTarget:
    """The `<Connect><Stream>` of a TwiML answer, or a SimulationError saying what came instead."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as error:
        raise SimulationError(f"/voice/answer did not return TwiML ({error})") from error
    stream = root.find("./Connect/Stream")
    if stream is None or not stream.get("url"):
        said = " ".join((say.text or "").strip() for say in root.iter("Say"))
        instead = f"it said {said!r}" if said else f"it answered {xml_text[:160]!r}"
        raise SimulationError(f"the server did not connect a media stream; {instead}")
    parameters = {
        p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter") if p.get("name")
    }
    if not parameters.get("call_id"):
        raise SimulationError("the TwiML <Stream> carries no call_id <Parameter>")
    return StreamTarget(url=stream.get("url", ""), parameters=parameters)


def media_stream_url(base_url: str, stream_url: str, query: dict[str, str] | None = None) -> str:
    """Where to open the stream: a local http base keeps its host and uses ws://."""
    base, stream = urlsplit(base_url), urlsplit(stream_url)
    if base.scheme == "http":
        scheme, netloc = "ws", base.netloc
    else:
        scheme = "wss" if stream.scheme in ("wss", "https") else "ws"
        netloc = stream.netloc
    params = parse_qsl(stream.query) + list((query or {}).items())
    return urlunsplit((scheme, netloc, stream.path or "/ws", urlencode(params), ""))


def signed_upgrade(token: str, ws_url: str) -> dict[str, str]:
    """The header Twilio sends with a media stream's WebSocket upgrade: its signature over
    the URL it opens, with no fields."""
    return {"X-Twilio-Signature": RequestValidator(token).compute_signature(ws_url, {})}


def call_params(parties: CallParties) -> dict[str, str]:
    """The fields Twilio sends with every request about a call."""
    return {
        "AccountSid": parties.account_sid, "CallSid": parties.call_sid,
        "From": parties.from_number, "To": parties.to_number, "Caller": parties.from_number,
        "Called": parties.to_number, "Direction": parties.direction, "ApiVersion": "2010-04-01",
    }


async def send_signed(http: httpx.AsyncClient, validator: RequestValidator, url: str,
                      params: dict[str, str], method: str = "POST") -> httpx.Response:
    """A webhook request as Twilio makes it: the fields as a form (POST) or appended to the
    query (GET), signed with X-Twilio-Signature over the URL and the posted fields."""
    if method.upper() == "GET":
        url = f"{url}{'&' if '?' in url else '?'}{urlencode(params)}" if params else url
        signature = validator.compute_signature(url, {})
        return await http.get(url, headers={"X-Twilio-Signature": signature})
    signature = validator.compute_signature(url, params)
    return await http.post(url, data=params, headers={"X-Twilio-Signature": signature})


class TwilioWebhooks:
    """Posts the voice webhooks exactly as Twilio does, signed with X-Twilio-Signature."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, token: str, parties: CallParties
    ) -> None:
        self._http = http
        self._base = base_url
        self._validator = RequestValidator(token)
        self._parties = parties

    def _common(self) -> dict[str, str]:
        return call_params(self._parties)

    async def _post(self, path: str, params: dict[str, str]) -> httpx.Response:
        try:
            return await send_signed(self._http, self._validator, self._base + path, params)
        except httpx.ConnectError as error:
            raise SimulationError(
                f"cannot reach the server at {self._base} ({_reason(error)}); "
                "is `python main.py serve` running?"
            ) from error
        except httpx.HTTPError as error:
            raise SimulationError(f"POST {path} failed: {_reason(error)}") from error

    async def answer(self) -> StreamTarget:
        """The incoming-call webhook; the TwiML's media stream."""
        response = await self._post("/voice/answer", {**self._common(), "CallStatus": "ringing"})
        if response.status_code == 403:
            raise SimulationError(
                f"the server rejected the webhook signature ({_detail(response)}): sign with the "
                "server's token (--twilio-token, TWILIO_AUTH_TOKEN, or run from the server's "
                "directory so its DATA_DIR dev token is used) and pass --url as the server sees "
                "it (its PUBLIC_URL, if set)"
            )
        if response.status_code != 200:
            raise SimulationError(
                f"POST /voice/answer: HTTP {response.status_code} {_detail(response)}"
            )
        return parse_stream_twiml(response.text)

    async def completed(self, duration_s: float) -> None:
        """The status callback Twilio posts when the call ends (best effort, like Twilio's)."""
        params = {
            **self._common(), "CallStatus": "completed",
            "CallDuration": str(max(0, round(duration_s))),
            "CallbackSource": "call-progress-events",
            "SequenceNumber": "0", "Timestamp": formatdate(usegmt=True),
        }
        try:
            response = await self._post("/voice/status", params)
        except SimulationError as error:
            logger.warning(f"status callback not delivered: {error}")
            return
        if response.status_code >= 300:
            logger.warning(f"status callback: HTTP {response.status_code}")


def _reason(error: BaseException) -> str:
    """A short cause, looking through wrapped exceptions for the refused connection."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(error) or type(error).__name__
    return text.splitlines()[0][:160]


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
        if isinstance(body, dict) and "detail" in body:
            return str(body["detail"])[:160]
    except ValueError:
        pass
    return response.text[:160].replace("\n", " ")


async def fetch_call_record(
    http: httpx.AsyncClient, base_url: str, call_id: str, api_key: str | None,
    *, wait_s: float = RECORD_WAIT_S, analysis_wait_s: float = ANALYSIS_WAIT_S,
) -> tuple[dict[str, Any] | None, str | None]:
    """The call record once its completion_reason is set and, when the server analyses
    calls, its analysis is written (or `analysis_wait_s` more passed): (record, problem)."""
    if not api_key:
        return None, (
            "no API key to read the call record: pass --api-key, set VOICE_API_KEY, "
            "or run from the server's directory so its DATA_DIR dev key is found"
        )
    url = f"{base_url}/api/calls/{call_id}"
    headers = {"Authorization": f"Bearer {api_key}"}
    deadline = time.monotonic() + wait_s
    record: dict[str, Any] | None = None
    while True:
        try:
            response = await http.get(url, headers=headers)
        except httpx.HTTPError as error:
            return record, f"cannot read the call record: {_reason(error)}"
        if response.status_code == 401:
            return None, f"the server rejected the API key ({_detail(response)})"
        if response.status_code == 200:
            try:
                record = response.json()
            except ValueError:
                return None, f"GET /api/calls/{call_id} did not return JSON"
            if record.get("completion_reason"):
                analysing = "analysis" in record and record["analysis"] is None
                if not analysing or time.monotonic() >= deadline + analysis_wait_s:
                    return record, None
        elif response.status_code != 404:
            status = f"HTTP {response.status_code} {_detail(response)}"
            return None, f"GET /api/calls/{call_id}: {status}"
        if time.monotonic() >= deadline and not (record or {}).get("completion_reason"):
            if record is None:
                return None, f"call {call_id} not found in the API"
            return record, f"completion_reason still unset {wait_s:g} s after hang-up"
        await asyncio.sleep(RECORD_POLL_S)


# -- The text leg (Pipecat eval / RTVI) ----------------------------------------


@dataclass
class AgentUtterance:
    """One complete thing the agent said, as text (text mode)."""

    at_s: float
    text: str
    source: str  # the RTVI message it was read from
    interrupted: bool = False


# Messages that show the agent is producing a turn (not the user-* echoes of ours).
_AGENT_ACTIVITY = {
    "bot-llm-started", "bot-llm-text", "bot-llm-stopped", "bot-tts-started", "bot-tts-stopped",
    "bot-started-speaking", "bot-stopped-speaking", "bot-output", "llm-function-call-started",
    "llm-function-call-in-progress", "llm-function-call-stopped",
}


def _normalized(text: str) -> str:
    return " ".join(text.split()).lower()


class AgentTextTracker:
    """Reads the bot's RTVI messages into whole agent utterances, once each.

    The agent's words are `bot-llm-text` chunks joined between `bot-llm-started`
    and `bot-llm-stopped`, as Pipecat's own eval harness reads them. `bot-output`
    is unreliable in a skip-TTS session: text that waits for the bot to "speak"
    (which it never does without audio) holds back every later segment, and a
    word-timestamped TTS repeats each segment once per word. A `bot-output`
    outside any LLM response, whose text this turn's LLM responses did not carry,
    is speech that bypassed the LLM (a greeting) and is taken from there.

    The turn is over once the LLM and every tool call have stopped and no agent
    message (LLM, TTS, speaking, output progress) has arrived for the quiet time.
    """

    def __init__(self) -> None:
        self.ready = False
        self.utterances: list[AgentUtterance] = []
        self.errors: list[str] = []
        self.last_activity: float | None = None
        self._llm_open = False
        self._interrupted = False
        self._chunks: list[str] = []
        self._tools: set[str] = set()
        self._turn_text = ""
        self._segments_seen: set[Any] = set()

    def caller_spoke(self) -> None:
        """A new caller line: what the agent said before it is no longer this turn's."""
        self._turn_text = ""

    def handle(self, message: dict[str, Any], now: float) -> AgentUtterance | None:
        kind = message.get("type")
        data = message.get("data") if isinstance(message.get("data"), dict) else {}
        if kind in _AGENT_ACTIVITY:
            self.last_activity = now
        if kind == "bot-ready":
            self.ready = True
        elif kind == "bot-llm-started":
            self._llm_open, self._interrupted, self._chunks = True, False, []
        elif kind == "bot-llm-text" and self._llm_open:
            self._chunks.append(str(data.get("text", "")))
        elif kind == "bot-interrupted" and self._llm_open:
            self._interrupted = True
        elif kind == "bot-llm-stopped" and self._llm_open:
            self._llm_open = False
            text = "".join(self._chunks).strip()
            self._turn_text += " " + text
            if text:
                return self._add(now, text, "bot-llm-text", self._interrupted)
        elif kind == "llm-function-call-in-progress":
            self._tools.add(str(data.get("tool_call_id")))
        elif kind == "llm-function-call-stopped":
            self._tools.discard(str(data.get("tool_call_id")))
        elif kind == "bot-output" and not self._llm_open:
            return self._from_output(data, now)
        elif kind in ("error", "error-response"):
            self.errors.append(str(data.get("error", ""))[:200])
        return None

    def _from_output(self, data: dict[str, Any], now: float) -> AgentUtterance | None:
        text = str(data.get("text", "")).strip()
        if data.get("output_type") in ("word", "token") or not text:
            return None
        segment = data.get("segment_id")
        if segment is not None:
            if segment in self._segments_seen:
                return None
            self._segments_seen.add(segment)
        if _normalized(text) in _normalized(self._turn_text):
            return None
        self._turn_text += " " + text
        return self._add(now, text, "bot-output", False)

    def _add(self, now: float, text: str, source: str, interrupted: bool) -> AgentUtterance:
        utterance = AgentUtterance(round(now, 3), text, source, interrupted)
        self.utterances.append(utterance)
        return utterance

    def active_since(self, since: float) -> bool:
        return self.last_activity is not None and self.last_activity > since

    def mid_turn(self, now: float, quiet_s: float) -> bool:
        """Whether the agent is still on its turn: LLM or a tool running, or not quiet yet."""
        if self._llm_open or self._tools:
            return True
        return self.last_activity is not None and now - self.last_activity < quiet_s

    def turn_finished(self, since: float, now: float, quiet_s: float) -> bool:
        """The agent replied after `since`, its LLM and tools are done, and all is quiet."""
        if not self.active_since(since) or self._llm_open or self._tools:
            return False
        return now - (self.last_activity or 0.0) >= quiet_s


def rtvi_message(kind: str, message_id: str, data: dict[str, Any] | None) -> str:
    """A client RTVI message built with Pipecat's own model, so the label and shape match."""
    import pipecat.processors.frameworks.rtvi.models as RTVI

    return RTVI.Message(type=kind, id=message_id, data=data).model_dump_json()


@dataclass
class TextOutcome:
    """How the text leg ended and what the agent said."""

    ended_by: EndedBy
    utterances: list[AgentUtterance]
    close_code: int | None
    close_reason: str


class RtviTextLeg:
    """Types the caller's lines over Pipecat's eval transport, as an RTVI client."""

    def __init__(self, websocket: ClientConnection, timeline: CallTimeline, quiet_s: float) -> None:
        self._ws = websocket
        self._timeline = timeline
        self._quiet_s = quiet_s
        self._tracker = AgentTextTracker()
        self._ready = asyncio.Event()
        self._closed = asyncio.Event()
        self._close_code: int | None = None
        self._close_reason = ""

    async def run(self, caller: Caller) -> TextOutcome:
        import pipecat.processors.frameworks.rtvi.models as RTVI
        from pipecat.evals.serializer import EvalConnectionFlags, eval_connect_message

        about = {"library": "clinic-voice-simulator", "library_version": "1"}
        try:
            await self._ws.send(eval_connect_message(EvalConnectionFlags(skip_tts=True)))
            await self._ws.send(rtvi_message(
                "client-ready", "client-ready", {"version": RTVI.PROTOCOL_VERSION, "about": about}
            ))
        except ConnectionClosed as closed:
            self._note_closed(closed)
        receiver = asyncio.create_task(self._receive(), name="rtvi-receive")
        try:
            await self._wait_ready()
            ended_by = await self._converse(caller)
        finally:
            await self._hang_up()
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)
        return TextOutcome(ended_by, self._tracker.utterances, self._close_code, self._close_reason)

    async def _wait_ready(self) -> None:
        waiter = asyncio.create_task(self._ready.wait())
        closer = asyncio.create_task(self._closed.wait())
        await asyncio.wait(
            {waiter, closer}, timeout=BOT_READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        closer.cancel()
        if self._ready.is_set():
            return
        if self._closed.is_set():
            closed = f"{self._close_code} {self._close_reason}".strip()
            raise SimulationError(f"the server closed the text session ({closed})")
        raise SimulationError(
            f"no bot-ready within {BOT_READY_TIMEOUT_S:g} s of client-ready "
            "(is RTVI on for text sessions?)"
        )

    async def _converse(self, caller: Caller) -> EndedBy:
        since, number, wait_s = 0.0, 0, 0.0
        while (cue := caller.next_cue()) is not None:
            number += 1
            wait_s = cue.wait_s
            if cue.barge_in:
                await self._wait_for_agent(since, cue.wait_s, until="it starts")
                await self._sleep_or_close(BARGE_IN_DELAY_S)
                self._timeline.note(
                    "barge_in", f"line {number} typed while the agent's turn is open"
                )
            else:
                finished = await self._wait_for_agent(since, cue.wait_s, until="it is done")
                if not finished and not self._closed.is_set():
                    self._timeline.note("wait_timeout", f"agent not done after {cue.wait_s:g} s")
                await self._sleep_or_close(cue.pause_s)
            if self._closed.is_set():
                self._timeline.note("agent_hung_up", f"before caller line {number}")
                return "agent"
            line = await caller.next_line(number, self.heard_since(since))
            if line is None:  # the caller hangs up instead
                return self._caller_hangs_up()
            await self._say(line)
            since = self._timeline.now()
        if caller.hangup_after_s is not None:
            await self._sleep_or_close(caller.hangup_after_s)
        elif number:
            await self._wait_for_agent(since, wait_s, until="it is done")
            await self._sleep_or_close(TEXT_HANGUP_GRACE_S)
        if self._closed.is_set():
            self._timeline.note("agent_hung_up", "after the last caller line")
            return "agent"
        return self._caller_hangs_up()

    def heard_since(self, at_s: float) -> list[str]:
        """What the agent said after `at_s` (seconds on the call's clock), in order."""
        return [u.text for u in self._tracker.utterances if u.at_s >= at_s]

    def _caller_hangs_up(self) -> EndedBy:
        speaking = self._tracker.mid_turn(self._timeline.now(), self._quiet_s)
        self._timeline.note("caller_hangup", "during the agent's turn" if speaking else "")
        return "caller"

    async def _say(self, line: CallerLine) -> None:
        self._tracker.caller_spoke()
        self._timeline.note("caller_line", f"{line.number}: {line.text}")
        # No `audio_response` option: the connection is already text-only (eval-connect
        # skip_tts). Pipecat's RTVI processor, which never sees that flag, would answer an
        # explicit `false` by switching skip-TTS on for this line and back off after it,
        # leaving the agent's replies voiced (and held behind audio) in a text session.
        data = {"content": line.text, "options": {"run_immediately": True}}
        try:
            await self._ws.send(rtvi_message("send-text", f"line-{line.number}", data))
        except ConnectionClosed as closed:
            self._note_closed(closed)

    async def _wait_for_agent(
        self, since: float, timeout_s: float, until: Literal["it starts", "it is done"]
    ) -> bool:
        """Wait for the agent's turn after `since` to start or to finish; False on timeout."""
        deadline = self._timeline.now() + timeout_s
        while not self._closed.is_set():
            now = self._timeline.now()
            if until == "it starts" and self._tracker.active_since(since):
                return True
            if until == "it is done" and self._tracker.turn_finished(since, now, self._quiet_s):
                return True
            if now >= deadline:
                return False
            await self._sleep_or_close(0.05)
        return False

    async def _sleep_or_close(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._closed.wait(), timeout=seconds)
        except TimeoutError:
            pass

    async def _receive(self) -> None:
        try:
            async for raw in self._ws:
                self._handle(raw)
        except ConnectionClosed as closed:
            self._note_closed(closed)
            return
        self._note_closed(None)

    def _handle(self, raw: str | bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("label") != "rtvi-ai":
            return
        utterance = self._tracker.handle(message, self._timeline.now())
        if self._tracker.ready and not self._ready.is_set():
            self._ready.set()
            self._timeline.note("bot_ready")
        if utterance is not None:
            suffix = " [interrupted]" if utterance.interrupted else ""
            self._timeline.note("agent_said", utterance.text + suffix, at_s=utterance.at_s)
        if message.get("type") in ("error", "error-response"):
            logger.warning(f"text session: the server reported {self._tracker.errors[-1]!r}")

    def _note_closed(self, closed: ConnectionClosed | None) -> None:
        if self._closed.is_set():
            return
        frame = closed.rcvd if closed is not None else None
        if frame is not None:
            self._close_code, self._close_reason = frame.code, frame.reason
        elif self._ws.close_code is not None:
            self._close_code, self._close_reason = self._ws.close_code, self._ws.close_reason or ""
        self._closed.set()

    async def _hang_up(self) -> None:
        """End the session the way Pipecat's harness does: eval-cancel, then close."""
        if not self._closed.is_set():
            from pipecat.evals.serializer import EVAL_CANCEL_MESSAGE_TYPE

            try:
                await self._ws.send(
                    rtvi_message(
                        "client-message", "eval-cancel", {"t": EVAL_CANCEL_MESSAGE_TYPE, "d": None}
                    )
                )
            except ConnectionClosed:
                pass
        await self._ws.close()


# -- The result --------------------------------------------------------------


@dataclass
class SimulationResult:
    """The call as the server recorded it, plus what the simulated caller noticed."""

    call_id: str
    mode: Literal["audio", "text"]
    ended_by: EndedBy
    record: dict[str, Any] | None
    record_error: str | None
    client_log: list[ClientEvent] = field(default_factory=list)
    agent_speech: list[SpeechSegment] = field(default_factory=list)
    agent_utterances: list[AgentUtterance] = field(default_factory=list)
    stream_closed: str = ""

    @property
    def completion_reason(self) -> str | None:
        return (self.record or {}).get("completion_reason")

    def to_json_dict(self) -> dict[str, Any]:
        """The stable, timing-free summary tests and scripts compare."""
        record = self.record or {}
        return {
            "call_id": self.call_id,
            "completion_reason": record.get("completion_reason"),
            "final_state": record.get("final_state"),
            "turns": [
                {"speaker_role": t.get("speaker_role"), "text": t.get("text")}
                for t in record.get("turns") or []
            ],
            "tool_calls": [
                {"name": t.get("name"), "succeeded": t.get("succeeded"),
                 "error_class": t.get("error_class")}
                for t in record.get("tool_calls") or []
            ],
            "transitions": [
                {"previous_state": t.get("previous_state"), "next_state": t.get("next_state"),
                 "reason": t.get("reason")}
                for t in record.get("transitions") or []
            ],
            "events": [
                {"type": e.get("type"), "data": e.get("data")} for e in record.get("events") or []
            ],
            # only from a server that analyses calls (null until the analysis is written)
            **({"analysis": _analysis(record["analysis"])} if "analysis" in record else {}),
        }


def _analysis(analysis: dict[str, Any] | None) -> dict[str, Any] | None:
    """The call's summary and its scores (reasons and turns left to the record)."""
    if not analysis:
        return None
    summary = analysis.get("summary") or {}
    return {
        "analyst": analysis.get("analyst"),
        "quality_score": analysis.get("quality_score"),
        "scores": {name: (score or {}).get("score")
                   for name, score in (analysis.get("quality") or {}).items()},
        **{part: [line.get("text") for line in summary.get(part) or []]
           for part in ("wanted", "done", "left_for_person", "concerns")},
    }


def format_transcript(result: SimulationResult) -> str:
    """A human-readable account: the server's transcript, then the caller's timeline."""
    summary = result.to_json_dict()
    lines = [
        f"call {result.call_id} ({result.mode}), ended by the {result.ended_by}",
        (
            f"completion: {summary['completion_reason'] or '-'}   "
            f"final state: {summary['final_state'] or '-'}"
        ),
    ]
    if result.record_error:
        lines.append(f"record: {result.record_error}")
    if result.record is not None:
        lines.append("")
        lines.append("transcript (server record):")
        for turn in result.record.get("turns") or []:
            mark = " [interrupted]" if turn.get("interrupted") else ""
            lines.append(f"  {turn.get('speaker_role')!s:>7}: {turn.get('text')}{mark}")
        if not result.record.get("turns"):
            lines.append("  (no turns)")
        for tool in summary["tool_calls"]:
            outcome = "ok" if tool["succeeded"] else f"failed ({tool['error_class'] or 'error'})"
            lines.append(f"  tool {tool['name']}: {outcome}")
        for step in summary["transitions"]:
            reason = f" ({step['reason']})" if step["reason"] else ""
            lines.append(f"  state {step['previous_state'] or '-'} -> {step['next_state']}{reason}")
        analysis = summary.get("analysis")
        if analysis is not None:
            lines += ["", f"quality {analysis['quality_score']} by {analysis['analyst']}: "
                      + ", ".join(f"{name} {score}" for name, score in analysis["scores"].items())]
            lines += [f"  {part.replace('_', ' ')}: {text}"
                      for part in ("wanted", "done", "left_for_person", "concerns")
                      for text in analysis[part]]
    lines.append("")
    lines.append("what the caller heard and did:")
    timeline = [(e.at_s, f"{e.kind.replace('_', ' ')}" + (f": {e.detail}" if e.detail else ""))
                for e in result.client_log if e.kind != "agent_speaking"]
    for segment in result.agent_speech:
        cut = ", cut short by clear" if segment.cut_short else ""
        spoke = f"agent spoke {segment.start_s:.2f}-{segment.end_s:.2f} s{cut}"
        timeline.append((segment.start_s, spoke))
    for at_s, text in sorted(timeline, key=lambda item: item[0]):
        lines.append(f"  {at_s:7.2f}s  {text}")
    if result.stream_closed:
        lines.append(f"  stream closed: {result.stream_closed}")
    return "\n".join(lines)


# -- Running a call --------------------------------------------------------------


async def _render_voice(
    script: CallScript, synthesize: Synthesizer | None
) -> list[bytes]:
    """Every line's audio: a given synthesizer line by line, else eSpeak NG in a fresh
    process, so a script sounds the same on every run (services.espeak.engine.synthesize_script)."""
    shapes = [turn.voice.synthesis() if turn.voice is not None else {} for turn in script.turns]
    if synthesize is not None:
        rendered = []
        for number, (turn, shape) in enumerate(zip(script.turns, shapes, strict=True), 1):
            try:
                rendered.append(await synthesize(turn.say, SAMPLE_RATE, **shape))
            except Exception as error:
                raise SimulationError(
                    f"the caller's voice failed on line {number}: {type(error).__name__}: {error}"
                ) from error
        return rendered
    try:
        from services.espeak.engine import synthesize_script
    except ImportError as error:
        raise SimulationError(
            f"the caller's voice needs services.espeak.engine ({error}); use --text to type instead"
        ) from error
    try:
        return await synthesize_script(
            [(turn.say, shape) for turn, shape in zip(script.turns, shapes, strict=True)], SAMPLE_RATE
        )
    except Exception as error:
        raise SimulationError(
            f"the caller's voice failed: {type(error).__name__}: {error}"
        ) from error


async def caller_lines(
    script: CallScript, synthesize: Synthesizer | None, text_mode: bool
) -> list[CallerLine]:
    """Synthesize every line before dialing, so speaking never waits on the engine."""
    audio = [b""] * len(script.turns) if text_mode else await _render_voice(script, synthesize)
    lines = []
    for number, (turn, pcm) in enumerate(zip(script.turns, audio, strict=True), 1):
        frames: list[bytes] = []
        if not text_mode:
            frames = split_frames(encode_ulaw(pcm))
            if not frames:
                raise SimulationError(f"the caller's voice produced no audio for line {number}")
        lines.append(CallerLine(number, turn.say, frames, turn.pause_s, turn.barge_in, turn.wait_s))
    return lines


async def simulate_call(
    script: CallScript,
    *,
    base_url: str,
    api_key: str | None,
    twilio_token: str,
    text_mode: bool = False,
    log: Log = print,
    synthesize: Synthesizer | None = None,
    account_sid: str | None = None,
    quiet_s: float | None = None,
    record_wait_s: float = RECORD_WAIT_S,
    analysis_wait_s: float = ANALYSIS_WAIT_S,
    twilio: TwilioStandIn | None = None,
    handoff_wait_s: float = HANDOFF_WAIT_S,
) -> SimulationResult:
    """Place one simulated call and return the server's record of it (with its analysis,
    when the server writes one within `analysis_wait_s` after the record is complete).

    With `twilio` (the Twilio stand-in the service is pointed at; tests only), the call is
    registered there under its account, so the service can act on it through the REST
    API: see `place_call`. Raises SimulationError when the call cannot take place (server
    unreachable, webhook rejected, no media stream); a call that ran but whose record
    cannot be read returns a result with `record_error` set.
    """
    if twilio is not None and text_mode:
        raise SimulationError("a call through the Twilio stand-in is an audio call")
    lines = await caller_lines(script, synthesize, text_mode)
    parties = CallParties.new(script.from_number, script.to_number,
                              twilio.account_sid if twilio is not None else account_sid)
    inbound = None
    if twilio is not None:
        inbound = twilio.add_inbound(parties.call_sid, parties.from_number, parties.to_number)
        if synthesize is not None:
            inbound.voice = _line_voice(synthesize)
    return await place_call(
        ScriptedCaller(lines, script.hangup_after_s), parties, name=script.name,
        base_url=base_url, api_key=api_key, twilio_token=twilio_token, text_mode=text_mode,
        log=log, quiet_s=quiet_s, record_wait_s=record_wait_s,
        analysis_wait_s=analysis_wait_s, inbound=inbound, handoff_wait_s=handoff_wait_s,
    )


def _line_voice(synthesize: Synthesizer) -> Callable[[str], Awaitable[bytes]]:
    async def voice(text: str) -> bytes:
        return await synthesize(text, SAMPLE_RATE)

    return voice


class TwilioCall(Protocol):
    """One inbound call as the Twilio stand-in's REST API sees it (simulator/inbound_leg.py
    `InboundLeg`): `redirected` once the service gives it new TwiML, `hung_up` once it
    hangs it up, `reconnected` once that TwiML connects a media stream again
    (`take_reconnect`), `finished` once the call is over; `voice` voices the caller's
    lines in a conference. The simulator says how each of its streams ended."""

    redirected: asyncio.Event
    reconnected: asyncio.Event
    hung_up: asyncio.Event
    finished: asyncio.Event
    voice: Callable[[str], Awaitable[bytes]] | None

    def take_reconnect(self) -> tuple[str, dict[str, str]] | None: ...

    def stream_ended(self, *, caller_hung_up: bool) -> None: ...


class TwilioStandIn(Protocol):
    """The Twilio stand-in (simulator/twilio_rest.py `FakeTwilioRest`) as a simulated
    inbound call uses it."""

    account_sid: str

    def add_inbound(self, call_sid: str, from_number: str, to_number: str) -> TwilioCall: ...


# Opens what lets a caller on an audio call know the agent's words (simulator/personas).
Listener = Callable[[str, "CallTimeline"], AbstractAsyncContextManager[AgentWords]]


async def place_call(
    caller: Caller,
    parties: CallParties,
    *,
    base_url: str,
    api_key: str | None,
    twilio_token: str,
    name: str | None = None,
    text_mode: bool = False,
    log: Log = print,
    quiet_s: float | None = None,
    record_wait_s: float = RECORD_WAIT_S,
    analysis_wait_s: float = ANALYSIS_WAIT_S,
    listen: Listener | None = None,
    inbound: TwilioCall | None = None,
    handoff_wait_s: float = HANDOFF_WAIT_S,
) -> SimulationResult:
    """One call between `parties` with any caller (fixed lines, or one that answers what
    the agent says): the webhooks, the leg, the status callback and the record.
    `listen(call_id, timeline)`: how an audio caller hears the agent's words.

    `inbound`: the Twilio stand-in's view of this call (an audio call). New TwiML given to
    it there stops the media stream as Twilio does (`stop`, then the socket closes); the
    caller then stays on (hold, conference: played by the stand-in) until the call is over
    or the service connects a media stream again, which is opened with the TwiML's
    `<Parameter>`s and the caller's remaining lines; after `handoff_wait_s` the caller
    hangs up. The status callback is posted once the call is over."""
    if inbound is not None and text_mode:
        raise SimulationError("a call through the Twilio stand-in is an audio call")
    base_url = base_url.rstrip("/")
    timeline = CallTimeline(log)
    mode: Literal["audio", "text"] = "text" if text_mode else "audio"
    logger.debug(
        f"simulating {name or 'a call'} ({mode}) to {mask_phone(parties.to_number)} "
        f"from {mask_phone(parties.from_number)}"
    )
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        webhooks = TwilioWebhooks(http, base_url, twilio_token, parties)
        try:
            target = await webhooks.answer()
        except SimulationError:
            if inbound is not None:
                inbound.stream_ended(caller_hung_up=True)
            raise
        query = {"call_id": target.call_id} if text_mode else None
        ws_url = media_stream_url(base_url, target.url, query)
        log(f"answered: call {target.call_id}; opening {ws_url}")
        answered = time.monotonic()
        until = None if inbound is None else functools.partial(
            _first_set, inbound.redirected, inbound.hung_up)
        try:
            async with AsyncExitStack() as stack:
                words = None
                if listen is not None and not text_mode:
                    words = await stack.enter_async_context(listen(target.call_id, timeline))
                outcome = await run_leg(
                    ws_url, parties, target, timeline, caller, text_mode, quiet_s, words,
                    signed_upgrade(twilio_token, ws_url), until=until,
                )
                outcomes = [outcome]

                async def reopen(again: StreamTarget) -> AudioOutcome | TextOutcome:
                    url = media_stream_url(base_url, again.url)
                    return await run_leg(
                        url, replace(parties, stream_sid=_sid("MZ")), again, timeline, caller,
                        False, quiet_s, words, signed_upgrade(twilio_token, url), until=until,
                        restart_clock=False)

                if inbound is not None:
                    outcomes += await _follow_twilio(inbound, outcome, reopen, timeline,
                                                     handoff_wait_s)
        finally:
            if inbound is not None and not inbound.finished.is_set():
                inbound.stream_ended(caller_hung_up=True)
            await webhooks.completed(time.monotonic() - answered)
        closed = f"{outcome.close_code or ''} {outcome.close_reason}".strip()
        if outcome.close_code == POLICY_VIOLATION and not _agent_was_heard(outcome):
            raise SimulationError(f"the server refused the media stream at {ws_url} ({closed})")
        record, record_error = await fetch_call_record(
            http, base_url, target.call_id, api_key, wait_s=record_wait_s,
            analysis_wait_s=analysis_wait_s,
        )
    last = outcomes[-1]
    return SimulationResult(
        call_id=target.call_id, mode=mode, ended_by=last.ended_by, record=record,
        record_error=record_error, client_log=list(timeline.events),
        agent_speech=[segment for leg in outcomes if isinstance(leg, AudioOutcome)
                      for segment in leg.agent_speech],
        agent_utterances=last.utterances if isinstance(last, TextOutcome) else [],
        stream_closed=f"{last.close_code or ''} {last.close_reason}".strip(),
    )


async def _first_set(*events: asyncio.Event) -> None:
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _follow_twilio(
    call: TwilioCall, outcome: AudioOutcome | TextOutcome,
    reopen: Callable[[StreamTarget], Awaitable[AudioOutcome | TextOutcome]],
    timeline: CallTimeline, wait_s: float,
) -> list[AudioOutcome | TextOutcome]:
    """After each media stream of a call the Twilio stand-in knows: tell it how the stream
    ended (unless the service's new TwiML or hang-up ended it), then stay on until the
    call is over, or open the stream the service connects the caller to; the outcomes of
    the streams opened."""
    opened: list[AudioOutcome | TextOutcome] = []
    while True:
        if call.redirected.is_set():
            timeline.note("handed_off", "the service gave the call new TwiML")
        elif not call.hung_up.is_set():
            call.stream_ended(caller_hung_up=outcome.ended_by == "caller")
        target = await _next_stream(call, timeline, wait_s)
        if target is None:
            return opened
        outcome = await reopen(target)
        opened.append(outcome)


async def _next_stream(call: TwilioCall, timeline: CallTimeline,
                       wait_s: float) -> StreamTarget | None:
    """The stream the service connects the caller to next; None once the call is over
    (the caller hangs up after `wait_s` without either)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while not call.finished.is_set():
        remaining = deadline - loop.time()
        if remaining <= 0:
            timeline.note("caller_hangup", f"handed off for {wait_s:g} s")
            call.stream_ended(caller_hung_up=True)
            return None
        try:
            await asyncio.wait_for(_first_set(call.finished, call.reconnected), remaining)
        except TimeoutError:
            continue
        reconnect = call.take_reconnect() if call.reconnected.is_set() else None
        if reconnect is not None:
            url, parameters = reconnect
            timeline.note("reconnected", url)
            return StreamTarget(url, parameters)
    timeline.note("call_over")
    return None


def _agent_was_heard(outcome: AudioOutcome | TextOutcome) -> bool:
    """A stream closed before the agent said anything never became a call."""
    if isinstance(outcome, AudioOutcome):
        return outcome.agent_media_received > 0
    return bool(outcome.utterances)


async def run_leg(
    ws_url: str, parties: CallParties, target: StreamTarget, timeline: CallTimeline,
    caller: Caller, text_mode: bool, quiet_s: float | None, agent_words: AgentWords | None,
    headers: dict[str, str], *, until: Callable[[], Awaitable[None]] | None = None,
    restart_clock: bool = True,
) -> AudioOutcome | TextOutcome:
    """Open the media stream at `ws_url` as Twilio does and play `caller` on it (typed over
    RTVI in text mode) until one side hangs up, or, on an audio call, `until()` returns
    (Twilio stops the stream). `restart_clock`: the stream opening is the call's time
    zero (a stream opened again later keeps the call's clock)."""
    try:
        websocket = await connect(ws_url, open_timeout=WS_OPEN_TIMEOUT_S, max_size=2**22,
                                  additional_headers=headers)
    except InvalidStatus as error:
        raise SimulationError(
            f"the server refused the media stream at {ws_url}: HTTP {error.response.status_code}"
            + (" (is the simulator signing with the server's Twilio token?)"
               if error.response.status_code == 403 else "")
        ) from error
    except (OSError, InvalidHandshake, TimeoutError) as error:
        raise SimulationError(
            f"cannot open the media stream at {ws_url}: {_reason(error)}"
        ) from error
    if restart_clock:
        timeline.restart()
    if text_mode:
        leg = RtviTextLeg(websocket, timeline, TEXT_QUIET_S if quiet_s is None else quiet_s)
        return await leg.run(caller)
    identity = StreamIdentity(
        parties.account_sid, parties.call_sid, parties.stream_sid, target.parameters
    )
    quiet = AGENT_QUIET_S if quiet_s is None else quiet_s
    audio = AudioCallLeg(websocket, identity, timeline, quiet_s=quiet, agent_words=agent_words)
    if until is None:
        return await audio.run(caller)
    stopper = asyncio.create_task(_stop_when(until, audio))
    try:
        return await audio.run(caller)
    finally:
        stopper.cancel()
        await asyncio.gather(stopper, return_exceptions=True)


async def _stop_when(until: Callable[[], Awaitable[None]], audio: AudioCallLeg) -> None:
    await until()
    audio.stop()


# -- The command line ------------------------------------------------------------


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """`main.py simulate` options."""
    parser.add_argument(
        "script", type=Path, nargs="?", default=None,
        help="caller script (YAML), e.g. scenarios/barge_in.yaml",
    )
    parser.add_argument("--json", action="store_true", help="print the call summary as JSON")
    parser.add_argument(
        "--text", action="store_true", help="type the lines over RTVI instead of speaking them"
    )
    parser.add_argument(
        "--url", default=None,
        help="service base URL as Twilio would call it (default http://127.0.0.1:7860, "
        "or the PORT setting)",
    )
    parser.add_argument(
        "--api-key", default=None,
        help="API key to read the call record (default $VOICE_API_KEY, else the DATA_DIR dev key)",
    )
    parser.add_argument(
        "--twilio-token", default=None,
        help="token to sign webhooks with (default TWILIO_AUTH_TOKEN, else the DATA_DIR dev token)",
    )


def default_base_url(settings: Settings) -> str:
    host = "127.0.0.1" if settings.server.host in ("0.0.0.0", "::", "") else settings.server.host
    return f"http://{host}:{settings.server.port}"


def resolve_credentials(args: argparse.Namespace, settings: Settings) -> tuple[str | None, str]:
    """(API key, Twilio token): explicit options, then the environment, then the dev files.

    The dev token file is read or created exactly as the server does, so a
    server on the same DATA_DIR signs and checks with the same token.
    """
    from runner import dev_credentials
    api_key = (
        args.api_key or os.environ.get("VOICE_API_KEY")
        or dev_credentials.read_dev_api_key(settings)
    )
    token = args.twilio_token or dev_credentials.twilio_auth_token(settings)
    return api_key, token


async def main_simulate(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Exit codes: 0 done, 1 the record is incomplete or an expectation failed, 2 no call."""
    def progress(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    try:
        if args.script is None:
            raise ScriptError("give a caller script, or --persona PATH")
        script = load_script(args.script)
        settings = settings or Settings()
        api_key, token = resolve_credentials(args, settings)
        result = await simulate_call(
            script, base_url=args.url or default_base_url(settings), api_key=api_key,
            twilio_token=token, text_mode=args.text, log=progress,
            account_sid=settings.telephony.twilio_account_sid,
        )
    except (ScriptError, SimulationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print()
        print(format_transcript(result))
    if result.record_error:
        print(f"warning: {result.record_error}", file=sys.stderr)
        return 1
    if script.expect is not None:
        failures = script.expect.failures(result.to_json_dict())
        for failure in failures:
            print(f"expectation failed: {failure}", file=sys.stderr)
        if failures:
            return 1
        print("expectations: all met", file=sys.stderr if args.json else sys.stdout)
    return 0


def run_simulate(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Entry point for `python main.py simulate`; Ctrl-C is one line, not a traceback."""
    try:
        return event_loop.run(main_simulate(args, settings))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
