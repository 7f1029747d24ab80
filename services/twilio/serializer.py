"""Twilio Media Streams, hardened: bad input is logged and counted, never fatal to the server.

Twilio sends `connected`, `start`, then `media` every 20 ms, `mark`, `dtmf` and
finally `stop`. Anything else (garbage JSON, unknown events, media before start,
oversized messages) is a clear log line and a `bad_input` event in the call
record; too many of them end that call with `protocol_error`. Other calls are
untouched: each call owns its own serializer and pipeline.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from fastapi import WebSocket
from loguru import logger
from pipecat.audio.dtmf.types import KeypadEntry
from pipecat.frames.frames import CancelWorkerFrame, Frame
from pipecat.serializers.twilio import TwilioFrameSerializer
from starlette.websockets import WebSocketDisconnect

from config import Settings
from services.twilio.twiml import transfer_twiml

# Events recorded individually; after this many only the count is kept.
MAX_RECORDED_BAD_EVENTS = 10
# 20 ms of 8 kHz μ-law is 160 bytes; allow generous slack for other packetisations.
MAX_MEDIA_PAYLOAD_BYTES = 8000
TWILIO_API = "https://api.twilio.com"
# Ending the call must not hold the pipeline's shutdown for long.
HANG_UP_TIMEOUT_S = 5.0
KEYPAD = frozenset(entry.value for entry in KeypadEntry)
# Twilio's "The requested resource was not found": the call had already ended.
TWILIO_NOT_FOUND = 20404


class BadMessage(Exception):
    """A media-stream message that does not follow the protocol."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


def parse_message(data: str | bytes, max_bytes: int) -> dict[str, Any]:
    """Parse one WebSocket message into a Twilio event object, or raise BadMessage.
    Twilio sends text frames only: a binary frame is a bad message whatever it holds."""
    if isinstance(data, bytes | bytearray):
        raise BadMessage("binary", f"{len(data)} bytes")
    if len(data) > max_bytes:
        raise BadMessage("oversized", f"{len(data)} bytes")
    try:
        message = json.loads(data)
    except (ValueError, TypeError) as error:
        raise BadMessage("invalid_json", type(error).__name__) from error
    if not isinstance(message, dict) or not isinstance(message.get("event"), str):
        raise BadMessage("not_an_event")
    return message


def check_media(message: dict[str, Any]) -> None:
    """A media event must carry a base64 payload of plausible size."""
    media = message.get("media")
    payload = media.get("payload") if isinstance(media, dict) else None
    if not isinstance(payload, str):
        raise BadMessage("media_without_payload")
    try:
        audio = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise BadMessage("media_bad_base64") from error
    if len(audio) > MAX_MEDIA_PAYLOAD_BYTES:
        raise BadMessage("media_oversized", f"{len(audio)} bytes")


def check_dtmf(message: dict[str, Any]) -> None:
    """A dtmf event must carry one keypad digit."""
    dtmf = message.get("dtmf")
    digit = dtmf.get("digit") if isinstance(dtmf, dict) else None
    if not isinstance(digit, str) or digit not in KEYPAD:
        raise BadMessage("dtmf_malformed")


async def _receive(websocket: WebSocket) -> str | bytes | None:
    """The next message's text or bytes; None once the peer has closed."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    return text if text is not None else message.get("bytes") or b""


@dataclass
class StreamStart:
    """What Twilio's `start` message tells us about the stream."""

    stream_sid: str
    call_sid: str | None
    account_sid: str | None
    custom_parameters: dict[str, str] = field(default_factory=dict)
    bad_messages: list[str] = field(default_factory=list)


class CallEvents(Protocol):
    def event(self, type_: str, **data: Any) -> None: ...


class StreamCall(Protocol):
    """The call a media stream carries: what the serializer tells it and asks of it."""

    call_id: str
    log: CallEvents

    @property
    def transfer_to(self) -> str | None:
        """Where the caller is put through when the call ends (None: hang up)."""

    def count_bad_message(self) -> int:
        """One more bad message on the stream; how many so far."""

    def stream_stopped(self) -> str:
        """The caller hung up (Twilio stopped the stream); the call's completion reason."""

    def end_for_bad_messages(self) -> str | None:
        """Too many bad messages: the completion reason, or None if the call was already
        ending for another reason."""


def note_bad_message(call: StreamCall | None, error: BadMessage, where: str) -> int:
    """Log and record a protocol violation (kind only: payloads may carry caller audio);
    how many the call has had so far."""
    call_id = call.call_id if call else "unknown"
    logger.warning(f"media stream {where}: bad message ({error.kind}) on call {call_id}")
    if call is None:
        return 0
    count = call.count_bad_message()
    if count <= MAX_RECORDED_BAD_EVENTS:
        call.log.event("bad_input", kind=error.kind, where=where, detail=error.detail)
    return count


async def read_stream_start(
    websocket: WebSocket, *, first: str | None, timeout_s: float, max_bytes: int, max_bad: int
) -> StreamStart | None:
    """Read messages until Twilio's `start`; tolerate junk before it, give up on timeout.

    `first` is a message already read by the caller (to tell Twilio from eval).
    """
    bad: list[str] = []
    pending = [first] if first is not None else []

    async def _read() -> StreamStart | None:
        while True:
            data = pending.pop() if pending else await _receive(websocket)
            if data is None:
                logger.info("media stream: closed by the peer before start")
                return None
            try:
                message = parse_message(data, max_bytes)
            except BadMessage as error:
                note_bad_message(None, error, "before start")
                bad.append(error.kind)
                if len(bad) >= max_bad:
                    return None
                continue
            event = message["event"]
            if event == "connected":
                continue
            if event == "start":
                start = message.get("start")
                if not isinstance(start, dict) or not isinstance(start.get("streamSid"), str):
                    bad.append("start_without_stream_sid")
                    continue
                params = start.get("customParameters")
                return StreamStart(
                    stream_sid=start["streamSid"],
                    call_sid=start.get("callSid"),
                    account_sid=start.get("accountSid"),
                    custom_parameters={
                        str(k): str(v) for k, v in params.items()
                    } if isinstance(params, dict) else {},
                    bad_messages=bad,
                )
            if event == "stop":
                return None
            kind = "media_before_start" if event == "media" else "unexpected_before_start"
            note_bad_message(None, BadMessage(kind), "before start")
            bad.append(kind)
            if len(bad) >= max_bad:
                return None

    try:
        return await asyncio.wait_for(_read(), timeout_s)
    except TimeoutError:
        logger.warning("media stream: no start message in time")
        return None
    except (WebSocketDisconnect, RuntimeError):
        logger.warning("media stream: disconnected before start")
        return None


@dataclass(frozen=True)
class TwilioCredentials:
    """What changing a live call through Twilio's REST API needs (hang up, play TwiML)."""

    account_sid: str
    auth_token: str
    base_url: str | None = None


async def update_twilio_call(
    credentials: TwilioCredentials, call_sid: str, form: dict[str, str], *,
    timeout_s: float = HANG_UP_TIMEOUT_S,
) -> dict[str, Any]:
    """POST to the call's Call resource; returns the outcome for the call record.

    `outcome` is `completed` (Twilio took it), `already_ended` (Twilio error 20404)
    or `failed`.
    """
    root = (credentials.base_url or TWILIO_API).rstrip("/")
    url = f"{root}/2010-04-01/Accounts/{credentials.account_sid}/Calls/{call_sid}.json"
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            response = await http.post(
                url, data=form, auth=(credentials.account_sid, credentials.auth_token)
            )
    except httpx.HTTPError as error:
        return {"outcome": "failed", "error": type(error).__name__}
    if response.status_code == 200:
        return {"outcome": "completed"}
    try:
        code = response.json().get("code")
    except ValueError:
        code = None
    if response.status_code == 404 and code == TWILIO_NOT_FOUND:
        return {"outcome": "already_ended"}
    return {"outcome": "failed", "http_status": response.status_code, "twilio_code": code}


async def hang_up_twilio_call(credentials: TwilioCredentials, call_sid: str) -> dict[str, Any]:
    """End the call at Twilio (Status=completed)."""
    return await update_twilio_call(credentials, call_sid, {"Status": "completed"})


async def play_twiml_on_call(
    credentials: TwilioCredentials, call_sid: str, twiml: str
) -> dict[str, Any]:
    """Replace what the live call is doing with `twiml` (e.g. an apology, then hang up)."""
    return await update_twilio_call(credentials, call_sid, {"Twiml": twiml})


def twilio_credentials(settings: Settings, call_sid: str | None) -> TwilioCredentials | None:
    """REST credentials for this call, when the account is configured and the call known."""
    telephony = settings.telephony
    if not (telephony.twilio_account_sid and telephony.twilio_auth_token and call_sid):
        return None
    return TwilioCredentials(
        telephony.twilio_account_sid, telephony.twilio_auth_token.get_secret_value(),
        telephony.twilio_api_base_url,
    )


class SafeTwilioFrameSerializer(TwilioFrameSerializer):
    """Twilio's serializer, but junk is recorded and dropped instead of ending the stream.

    Hanging up is ours too: bounded by a timeout and recorded as a `twilio_hangup`
    event, so a call Twilio keeps open after the pipeline ended is visible.
    """

    def __init__(
        self, *args: Any, session: StreamCall, max_message_bytes: int, max_bad: int,
        credentials: TwilioCredentials | None = None, **kwargs: Any,
    ) -> None:
        if credentials is not None:
            kwargs.update(
                account_sid=credentials.account_sid, auth_token=credentials.auth_token,
                base_url=credentials.base_url,
            )
        super().__init__(*args, **kwargs)
        self._session = session
        self._max_bytes = max_message_bytes
        self._max_bad = max_bad
        self._credentials = credentials
        self._hang_up_call_sid = kwargs.get("call_sid")
        # Puts the caller through to a person warmly (a conference, a summary first);
        # False when it could not, and the caller is then dialled through directly.
        self.hand_off: Callable[[str], Awaitable[bool]] | None = None

    async def _hang_up_call(self) -> None:
        """End the call at Twilio, or put the caller through if a transfer was agreed."""
        if self._credentials is None or not self._hang_up_call_sid:
            return
        if self._session.transfer_to and self.hand_off is not None and await self.hand_off(
                self._session.transfer_to):
            return
        if self._session.transfer_to:
            result = await play_twiml_on_call(
                self._credentials, self._hang_up_call_sid, transfer_twiml(self._session.transfer_to)
            )
            self._session.log.event("twilio_transfer", **result)
            if result["outcome"] != "failed":
                return
            logger.warning(f"call {self._session.call_id}: transfer failed ({result}); hanging up")
        result = await hang_up_twilio_call(self._credentials, self._hang_up_call_sid)
        self._session.log.event("twilio_hangup", **result)
        if result["outcome"] == "failed":
            logger.warning(f"call {self._session.call_id}: Twilio hang-up failed ({result})")

    async def deserialize(self, data: str | bytes) -> Frame | None:
        try:
            message = parse_message(data, self._max_bytes)
            event = message["event"]
            if event == "media":
                check_media(message)
            elif event == "stop":
                return self._caller_hung_up()
            elif event == "dtmf":
                check_dtmf(message)
            elif event == "mark":
                pass
            elif event in ("connected", "start"):
                raise BadMessage(f"repeated_{event}")
            else:
                raise BadMessage("unknown_event", event[:40])
        except BadMessage as error:
            return self._bad(error)
        try:
            return await super().deserialize(data)
        except Exception as error:  # noqa: BLE001 - a message Pipecat cannot read is bad input
            return self._bad(BadMessage("unreadable", type(error).__name__))

    def _caller_hung_up(self) -> Frame:
        reason = self._session.stream_stopped()
        self._session.log.event("stream_stopped", by="twilio")
        # The call is already over at Twilio; do not try to hang it up again.
        self._hangup_attempted = True
        return CancelWorkerFrame(reason=reason)

    def _bad(self, error: BadMessage) -> Frame | None:
        if note_bad_message(self._session, error, "in call") >= self._max_bad:
            reason = self._session.end_for_bad_messages()
            if reason is not None:
                logger.warning(f"call {self._session.call_id}: too many bad messages, ending call")
                return CancelWorkerFrame(reason=reason)
        return None
