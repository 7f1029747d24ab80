"""A local stand-in for Twilio's REST API: the IncomingPhoneNumbers resource
services/twilio/numbers.py uses, the Calls resource services/twilio/calls.py uses, the
Messages resource services/twilio/messages.py uses (simulator/twilio_messages.py) and the
Conferences and Participants resources (simulator/twilio_conference_api.py), in the
shapes Twilio documents (twilio.com/docs/phone-numbers/api/incomingphonenumber-resource,
/docs/voice/api/call-resource, /docs/usage/requests-to-twilio, /docs/errors).

In memory; a real HTTP server on 127.0.0.1 under `/2010-04-01`. Every request is
recorded (`requests`), then checked like Twilio does: HTTP Basic with the account SID and
auth token, else 401 with Twilio's error body `{code, message, more_info, status}`
(20003 "Authenticate"); a path naming another account, or an unknown SID, is 404
(20404). Lists are Twilio's paged shape (`incoming_phone_numbers` or `calls`, `page`,
`page_size`, `next_page_uri`...); a number's update takes form-encoded `VoiceUrl`,
`VoiceMethod`, `StatusCallback`, `StatusCallbackMethod` and answers with the whole
resource; a method other than GET or POST is a 400 (its code here is this stand-in's
choice).

Calls: `POST Calls.json` places a call (To, From and Url or Twiml required; From must be
one of the account's numbers, else 21212; a To that is not E.164 is 21211) and answers
201 with the call resource, `queued`. The call then runs in the background as Twilio runs
it, answered by the callee registered for its To number (`add_callee`; nobody answers an
unknown number): see simulator/outbound_callee.py, and simulator/twiml_run.py for the
TwiML it runs. `GET Calls.json` lists the placed calls newest first, filtered by To,
From, Status and StartTime (`StartTime>=` / `StartTime<=` take a date or a date-time; a
call not dialled yet counts from its creation). `GET Calls/{Sid}.json` reads one;
`POST Calls/{Sid}.json` with `Status=completed` hangs it up (`canceled` before it is
answered) and `Status=canceled` cancels one not answered yet; with `Twiml=` or `Url=`
(and `Method`) it gives the call new TwiML, which replaces what it runs; a call that has
ended cannot be changed (21220).

Inbound calls: the simulator plays Twilio for the calls it makes into the service, and
registers each (`add_inbound`, simulator/inbound_leg.py) so `GET` / `POST
Calls/{Sid}.json` work on it as on a placed call (not listed by `GET Calls.json`).

Conferences: the account's conferences (`conferences`, by name: the latest of each) are
made by the TwiML calls run (simulator/twilio_conference.py).

Run by hand (`python -m simulator.twilio_rest NUMBER... [--callee NUMBER=KIND]`, see
simulator/README.md): serves an account owning those numbers and prints the settings that
point the service at it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from aiohttp import web

from lib.redaction import mask_phone
from services.twilio.numbers import TwilioAccount
from simulator.inbound_leg import InboundLeg
from simulator.loopback import serve_on_loopback
from simulator.outbound_callee import (
    Callee,
    CalleeError,
    CalleeOutcome,
    CallTiming,
    PlacedCallRun,
    PlacedCallState,
    hang_up_status,
    parse_callee,
)
from simulator.simulator import E164
from simulator.twilio_api_shapes import error as _error
from simulator.twilio_api_shapes import page as _page
from simulator.twilio_conference import ConferenceBridge, ConferenceState
from simulator.twilio_conference_api import conference_route
from simulator.twilio_messages import FakeMessages, Refusal
from simulator.twilio_wire import Sent, rfc2822
from simulator.twiml_run import Document, LegWiring, UrlDocument

API = "/2010-04-01"
# Resource fields an update may set (form name → resource field).
UPDATABLE = {
    "VoiceUrl": "voice_url", "VoiceMethod": "voice_method",
    "StatusCallback": "status_callback", "StatusCallbackMethod": "status_callback_method",
    "FriendlyName": "friendly_name", "SmsUrl": "sms_url", "SmsMethod": "sms_method",
}
METHODS = {"GET", "POST"}
NOBODY = Callee("no_answer")
# How long `wait_for` waits for a call to end, unless told.
CALL_WAIT_S = 30.0


@dataclass(frozen=True)
class Received:
    """A request the stand-in received. `form`: the last value of each field; `fields`:
    every field in order, repeated ones (StatusCallbackEvent) included."""

    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Fault:
    """A refusal the next request gets instead of its answer (after `stall_s`)."""

    status: int
    code: int | None = None
    message: str = "injected fault"
    stall_s: float = 0.0


@dataclass
class FakeTwilioRest:
    """One Twilio account for one test: add its numbers and who answers the numbers it
    calls, then point the adapters at it."""

    account_sid: str = field(default_factory=lambda: "AC" + secrets.token_hex(16))
    auth_token: str = field(default_factory=lambda: secrets.token_hex(16))
    base_url: str = ""
    numbers: dict[str, dict[str, Any]] = field(default_factory=dict)  # by SID
    requests: list[Received] = field(default_factory=list)
    callees: dict[str, Callee] = field(default_factory=dict)  # by number
    calls: dict[str, PlacedCallState] = field(default_factory=dict)  # by SID, in order
    webhooks: list[Sent] = field(default_factory=list)
    timing: CallTiming = field(default_factory=CallTiming)
    faults: list[Fault] = field(default_factory=list)
    log: Callable[[str], None] = lambda line: None
    on_call_ended: Callable[[PlacedCallState], None] | None = None
    conferences: dict[str, ConferenceState] = field(default_factory=dict)  # by name
    inbound: dict[str, InboundLeg] = field(default_factory=dict)  # by SID
    inbound_lines: dict[str, list[str]] = field(default_factory=dict)  # by caller number
    texts: FakeMessages = field(init=False)
    _running: set[asyncio.Task[None]] = field(default_factory=set)
    _bridge: ConferenceBridge | None = None

    def __post_init__(self) -> None:
        self.texts = FakeMessages(self.account_sid, self.auth_token, API)

    def service_env(self, base_url: str) -> dict[str, str]:
        """The settings that point the service's Twilio REST calls (and its webhook
        signature checks) at this stand-in, served at `base_url`."""
        return {"TWILIO_API_BASE_URL": base_url, "TWILIO_ACCOUNT_SID": self.account_sid,
                "TWILIO_AUTH_TOKEN": self.auth_token}

    def account(self, **changes: Any) -> TwilioAccount:
        """This account as the Twilio adapters (services/twilio) take it, pointed at the
        stand-in once it serves; a short timeout, so a stalled request fails quickly."""
        return TwilioAccount(**{"account_sid": self.account_sid, "auth_token": self.auth_token,
                                "base_url": self.base_url, "timeout_s": 5.0, **changes})

    def add_number(self, phone_number: str, **fields: Any) -> str:
        """A number the account owns, pointed nowhere yet; its SID."""
        sid = "PN" + secrets.token_hex(16)
        now = rfc2822(datetime.now(UTC))
        self.numbers[sid] = {
            "account_sid": self.account_sid, "address_requirements": "none",
            "address_sid": None, "api_version": "2010-04-01", "beta": False,
            "capabilities": {"voice": True, "sms": True, "mms": True, "fax": False},
            "date_created": now, "date_updated": now, "emergency_status": "Inactive",
            "emergency_address_sid": None, "friendly_name": phone_number,
            "identity_sid": None, "origin": "twilio", "phone_number": phone_number,
            "sid": sid, "sms_application_sid": "", "sms_fallback_method": "POST",
            "sms_fallback_url": "", "sms_method": "POST", "sms_url": "",
            "status_callback": "", "status_callback_method": "POST", "trunk_sid": None,
            "uri": f"{API}/Accounts/{self.account_sid}/IncomingPhoneNumbers/{sid}.json",
            "voice_application_sid": None, "voice_caller_id_lookup": False,
            "voice_fallback_method": "POST", "voice_fallback_url": None,
            "voice_method": "POST", "voice_url": None, "voice_receive_mode": "voice",
            "status": "in-use", "bundle_sid": None,
            "subresource_uris": {"assigned_add_ons": f"{API}/Accounts/{self.account_sid}/"
                                 f"IncomingPhoneNumbers/{sid}/AssignedAddOns.json"},
            **fields,
        }
        return sid

    def add_callee(self, phone_number: str, callee: Callee | str) -> None:
        """Who answers when the account calls `phone_number`: a Callee, or its spec
        (`voicemail`, `busy`, `no_answer`, `fail`, `decline`, `person:FILE`, `operator`,
        `operator:FILE`)."""
        self.callees[phone_number] = parse_callee(callee) if isinstance(callee, str) else callee

    def add_inbound(self, call_sid: str, from_number: str, to_number: str, *,
                    conference_lines: list[str] | None = None) -> InboundLeg:
        """A call the simulator makes into the service, answered and in progress, for the
        REST API to act on; in a conference the caller says `conference_lines` (else the
        `inbound_lines` given for `from_number`)."""
        owned = {n["phone_number"]: sid for sid, n in self.numbers.items()}
        resource = self._call_resource(to_number, from_number, owned.get(to_number),
                                       sid=call_sid, direction="inbound")
        resource.update(status="in-progress", start_time=resource["date_created"])
        lines = self.inbound_lines.get(from_number, []) if conference_lines is None \
            else conference_lines
        leg = InboundLeg(resource, self.wiring(), conference_lines=list(lines))
        self.inbound[call_sid] = leg
        return leg

    @property
    def bridge(self) -> ConferenceBridge:
        """The account's conferences, as the calls' TwiML and the REST API reach them."""
        if self._bridge is None:
            self._bridge = ConferenceBridge(self.account_sid, self.auth_token,
                                            self.conferences, self.webhooks)
        return self._bridge

    def wiring(self) -> LegWiring:
        return LegWiring(self.bridge, self.auth_token, self.webhooks, self.timing.speech_scale)

    async def conference_over(self, name: str, timeout_s: float = CALL_WAIT_S
                              ) -> ConferenceState:
        """The conference `name` once it has ended and posted its last callback."""
        async def over() -> ConferenceState:
            while (conference := self.conferences.get(name)) is None:
                await asyncio.sleep(0.02)
            await conference.settled.wait()
            return conference

        return await asyncio.wait_for(over(), timeout_s)

    def fail_next(self, status: int, code: int | None = None, *, message: str = "injected fault",
                  stall_s: float = 0.0) -> None:
        """The next request is refused with `status` (Twilio's error body with `code`)."""
        self.faults.append(Fault(status, code, message, stall_s))

    def updates(self) -> list[Received]:
        return [r for r in self.requests if r.method == "POST"]

    def placed(self) -> list[Received]:
        """The requests that placed calls."""
        return [r for r in self.requests
                if r.method == "POST" and r.path.endswith("/Calls.json")]

    def outcome(self, sid: str) -> CalleeOutcome:
        return self.calls[sid].outcome

    def status_callbacks(self, sid: str) -> list[Sent]:
        return [sent for sent in self.webhooks if sent.call_sid == sid and sent.kind == "status"]

    async def wait_for(self, sid: str, timeout_s: float = CALL_WAIT_S) -> dict[str, Any]:
        """The call's resource once it has ended and its last callback has been sent."""
        await asyncio.wait_for(self.calls[sid].done.wait(), timeout_s)
        return self.calls[sid].resource

    async def close(self) -> None:
        """Stop every call still running (as if the line dropped), every conference's
        callbacks, and every text."""
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        for leg in self.inbound.values():
            await leg.close()
        await self.bridge.close()
        await self.texts.close()

    # --- HTTP -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        posted = await request.post() if request.method == "POST" else None
        fields = tuple((k, str(v)) for k, v in posted.items()) if posted is not None else ()
        form = dict(fields)
        self.requests.append(Received(request.method, request.path, dict(request.query),
                                      form, fields))
        if self.faults:
            fault = self.faults.pop(0)
            await asyncio.sleep(fault.stall_s)
            return _error(fault.status, fault.code or fault.status, fault.message)
        if not self._authenticated(request):
            return _error(401, 20003, "Authenticate")
        account = f"{API}/Accounts/{re.escape(self.account_sid)}"
        path = request.path
        listing = re.fullmatch(rf"{account}/IncomingPhoneNumbers\.json", path)
        one = re.fullmatch(rf"{account}/IncomingPhoneNumbers/(PN\w+)\.json", path)
        if listing and request.method == "GET":
            return self._list(request)
        if one and request.method == "GET" and one.group(1) in self.numbers:
            return web.json_response(self.numbers[one.group(1)])
        if one and request.method == "POST" and one.group(1) in self.numbers:
            return self._update(one.group(1), form)
        calls = re.fullmatch(rf"{account}/Calls\.json", path)
        call = re.fullmatch(rf"{account}/Calls/(CA\w+)\.json", path)
        if calls and request.method == "POST":
            return self._place(fields)
        if calls and request.method == "GET":
            return self._list_calls(request)
        if call and call.group(1) in self.calls and request.method == "GET":
            return web.json_response(self.calls[call.group(1)].resource)
        if call and call.group(1) in self.calls and request.method == "POST":
            return self._update_call(self.calls[call.group(1)], form)
        if call and call.group(1) in self.inbound and request.method == "GET":
            return web.json_response(self.inbound[call.group(1)].resource)
        if call and call.group(1) in self.inbound and request.method == "POST":
            return self._update_inbound(self.inbound[call.group(1)], form)
        conferences = conference_route(self.bridge, request, form, account, API)
        if conferences is not None:
            return conferences
        texts = re.fullmatch(rf"{account}/Messages\.json", path)
        text = re.fullmatch(rf"{account}/Messages/(SM\w+)\.json", path)
        if texts and request.method == "POST":
            return self._text(form)
        if texts and request.method == "GET":
            return _page(request, "messages", self.texts.listed(
                request.query.get("To"), request.query.get("From")))
        if text and text.group(1) in self.texts.sent and request.method == "GET":
            return web.json_response(self.texts.sent[text.group(1)].resource)
        return _error(404, 20404, f"The requested resource {request.path} was not found")

    def _text(self, form: dict[str, str]) -> web.Response:
        owned = {n["phone_number"] for n in self.numbers.values()}
        made = self.texts.create(form, owned)
        if isinstance(made, Refusal):
            return _error(made.status, made.code, made.message)
        return web.json_response(made, status=201)

    def _authenticated(self, request: web.Request) -> bool:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return scheme == "Basic" and (user, password) == (self.account_sid, self.auth_token)

    def _list(self, request: web.Request) -> web.Response:
        wanted = request.query.get("PhoneNumber")
        found = [n for n in self.numbers.values()
                 if wanted is None or n["phone_number"] == wanted]
        return _page(request, "incoming_phone_numbers", found)

    def _update(self, sid: str, form: dict[str, str]) -> web.Response:
        for name in ("VoiceMethod", "StatusCallbackMethod", "SmsMethod"):
            if name in form and form[name].upper() not in METHODS:
                return _error(400, 21200, f"{name} must be GET or POST")
        number = self.numbers[sid]
        for name, value in form.items():
            if name in UPDATABLE:
                number[UPDATABLE[name]] = value
        number["date_updated"] = rfc2822(datetime.now(UTC))
        return web.json_response(number)

    # --- Calls ------------------------------------------------------------------------

    def _place(self, fields: tuple[tuple[str, str], ...]) -> web.Response:
        request: dict[str, list[str]] = {}
        for name, value in fields:
            request.setdefault(name, []).append(value)
        form = {name: values[-1] for name, values in request.items()}
        to, from_ = form.get("To", ""), form.get("From", "")
        if not to:
            return _error(400, 21201, "No 'To' number is specified")
        if not from_:
            return _error(400, 21213, "No 'From' number is specified")
        if not re.fullmatch(E164, to):
            return _error(400, 21211, f"Invalid 'To' Phone Number: {to}")
        owned = {n["phone_number"]: sid for sid, n in self.numbers.items()}
        if from_ not in owned:
            return _error(400, 21212, f"Invalid From Number (caller ID): {from_}")
        if not form.get("Url") and not form.get("Twiml"):
            return _error(400, 21205, "Url parameter is required")
        for name in ("Method", "StatusCallbackMethod"):
            if name in form and form[name].upper() not in METHODS:
                return _error(400, 21200, f"{name} must be GET or POST")
        resource = self._call_resource(to, from_, owned[from_])
        callee = self.callees.get(to, NOBODY)
        state = PlacedCallState(resource, request, callee, CalleeOutcome(callee.kind))
        self.calls[resource["sid"]] = state
        run = PlacedCallRun(state, wiring=self.wiring(), timing=self.timing, log=self.log)
        task = asyncio.create_task(run.run(), name=f"twilio-call-{resource['sid'][:8]}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        if self.on_call_ended is not None:
            task.add_done_callback(lambda _task: self.on_call_ended(state))
        return web.json_response(resource, status=201)

    def _call_resource(self, to: str, from_: str, number_sid: str | None, *,
                       sid: str | None = None, direction: str = "outbound-api"
                       ) -> dict[str, Any]:
        sid = sid or "CA" + secrets.token_hex(16)
        now = rfc2822(datetime.now(UTC))
        uri = f"{API}/Accounts/{self.account_sid}/Calls/{sid}"
        return {
            "sid": sid, "date_created": now, "date_updated": now, "parent_call_sid": None,
            "account_sid": self.account_sid, "to": to, "to_formatted": to, "from": from_,
            "from_formatted": from_, "phone_number_sid": number_sid, "status": "queued",
            "start_time": None, "end_time": None, "duration": None, "price": None,
            "price_unit": "USD", "direction": direction, "answered_by": None,
            "api_version": "2010-04-01", "forwarded_from": None, "group_sid": None,
            "caller_name": None, "queue_time": "0", "trunk_sid": None, "uri": f"{uri}.json",
            "subresource_uris": {name: f"{uri}/{name.title().replace('_', '')}.json" for name
                                 in ("notifications", "recordings", "events", "streams")},
        }

    def _list_calls(self, request: web.Request) -> web.Response:
        query = request.query
        try:
            after = _moment(query.get("StartTime>"))
            before = _moment(query.get("StartTime<"), end_of_day=True)
            on = _moment(query.get("StartTime"))
        except ValueError:
            return _error(400, 20001, "StartTime must be a date (YYYY-MM-DD) or a date-time")
        found = []
        for state in reversed(list(self.calls.values())):
            call = state.resource
            started = _started(call)
            if any(name in query and call[key] != query[name]
                   for name, key in (("To", "to"), ("From", "from"), ("Status", "status"))):
                continue
            if after is not None and started < after:
                continue
            if before is not None and started > before:
                continue
            if on is not None and started.date() != on.date():
                continue
            found.append(call)
        return _page(request, "calls", found)

    def _update_call(self, state: PlacedCallState, form: dict[str, str]) -> web.Response:
        status, document = form.get("Status"), _document(form)
        if status is None and document is None:
            return web.json_response(state.resource)
        if status is not None and status not in ("completed", "canceled"):
            return _error(400, 20001, "Status must be canceled or completed")
        if state.ended:
            return _error(400, 21220, "Call is not in-progress. Cannot redirect.")
        if status is None and document is not None:
            state.give(document)
            return web.json_response(state.resource)
        if status == "canceled" and state.resource["status"] == "in-progress":
            return web.json_response(state.resource)  # canceling leaves an answered call be
        state.set_status(hang_up_status(state))
        state.hang_up.set()
        return web.json_response(state.resource)

    def _update_inbound(self, leg: InboundLeg, form: dict[str, str]) -> web.Response:
        status, document = form.get("Status"), _document(form)
        if status is not None and status not in ("completed", "canceled"):
            return _error(400, 20001, "Status must be canceled or completed")
        if (status is not None or document is not None) and leg.ended:
            return _error(400, 21220, "Call is not in-progress. Cannot redirect.")
        if status == "completed":
            leg.hang_up()
        elif status is None and document is not None:
            leg.give(document)
        return web.json_response(leg.resource)


def _document(form: dict[str, str]) -> Document | None:
    """The new TwiML a call update gives: inline (`Twiml`), else a URL (`Url`, `Method`)."""
    if form.get("Twiml"):
        return form["Twiml"]
    if form.get("Url"):
        return UrlDocument(form["Url"], form.get("Method", "POST").upper())
    return None


def _moment(value: str | None, *, end_of_day: bool = False) -> datetime | None:
    """A StartTime filter's value: a date (the day's start, or its end) or a date-time."""
    if value is None:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        day = datetime.fromisoformat(value).replace(tzinfo=UTC)
        return day.replace(hour=23, minute=59, second=59) if end_of_day else day
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _started(call: dict[str, Any]) -> datetime:
    """When the call started; one not dialled yet, when it was created."""
    return parsedate_to_datetime(call["start_time"] or call["date_created"])


@asynccontextmanager
async def serve_twilio_rest(fake: FakeTwilioRest, port: int = 0) -> AsyncIterator[str]:
    """Serve the stand-in on a loopback port (a free one by default); yields the base URL
    to configure (`TWILIO_API_BASE_URL`, Twilio's `https://api.twilio.com` in production).
    Calls still running when it stops are cut off."""
    async with serve_on_loopback(fake.handle, port) as url:
        fake.base_url = url
        try:
            yield url
        finally:
            await fake.close()


# --- The command line ---------------------------------------------------------------


def _callee_option(value: str) -> tuple[str, str]:
    number, sep, spec = value.partition("=")
    if not sep or not re.fullmatch(E164, number) or not spec:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give NUMBER=KIND, e.g. +15551234567=voicemail or "
            "+15551234567=person:scenarios/personas/x.yaml")
    return number, spec


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m simulator.twilio_rest",
        description="a local stand-in for Twilio's REST API: numbers, and calls the "
        "service places, answered by the callees given")
    parse.add_argument("numbers", nargs="+", help="numbers the account owns (E.164)")
    parse.add_argument(
        "--callee", action="append", type=_callee_option, default=[], metavar="NUMBER=KIND",
        help="who answers NUMBER: person:FILE (a persona or a call script), operator "
        "(or operator:FILE, a call script whose lines it says in the conference), decline, "
        "voicemail, busy, no_answer or fail (repeatable; nobody answers any other number)")
    parse.add_argument("--port", type=int, default=0)
    parse.add_argument("--ring-s", type=float, default=2.0,
                       help="ringing before a person or a voicemail answers (default 2)")
    parse.add_argument("--no-answer-s", type=float, default=15.0,
                       help="ringing before a call nobody answers ends (default 15)")
    parse.add_argument("--voicemail-s", type=float, default=30.0,
                       help="the longest message a voicemail records (default 30)")
    parse.add_argument("--speech-scale", type=float, default=1.0,
                       help="how long <Say> and <Pause> take against real time (default 1)")
    parse.add_argument(
        "--api-key", default=None,
        help="the service's API key, for a persona to hear the agent through the call's "
        "observer feed (default $VOICE_API_KEY, else the DATA_DIR dev key)")
    return parse


def _hearing(api_key: str | None) -> Any:
    from simulator.personas.run import observer_listener

    return lambda base_url: observer_listener(base_url, api_key)


def _report(state: PlacedCallState) -> None:
    """One line per call once it has ended (the number masked)."""
    call, outcome = state.resource, state.outcome
    said = f", said {len(outcome.said)} line(s)" if outcome.said else ""
    talk = (f", person said {len(outcome.callee_said)} line(s)"
            if outcome.callee_said else "")
    talk += f", in conference {', '.join(outcome.conferences)}" if outcome.conferences else ""
    error = f" ({outcome.error})" if outcome.error else ""
    print(f"call {call['sid']} to {mask_phone(call['to'])}: {outcome.kind}, "
          f"{call['status']} after {call['duration'] or 0} s{said}{talk}{error}", flush=True)


async def _serve_until_stopped(args: argparse.Namespace) -> None:
    timing = CallTiming(args.ring_s, args.no_answer_s, args.voicemail_s,
                        speech_scale=args.speech_scale)
    fake = FakeTwilioRest(timing=timing, on_call_ended=_report)
    for number in args.numbers:
        fake.add_number(number)
    api_key = args.api_key or _api_key()
    for number, spec in args.callee:
        fake.add_callee(number, parse_callee(spec, hearing=_hearing(api_key)))
    async with serve_twilio_rest(fake, args.port) as base_url:
        print("\n".join(f"export {name}={value}"
                        for name, value in fake.service_env(base_url).items()), flush=True)
        await asyncio.Event().wait()


def _api_key() -> str | None:
    import os

    if os.environ.get("VOICE_API_KEY"):
        return os.environ["VOICE_API_KEY"]
    from config import Settings
    from runner.dev_credentials import read_dev_api_key

    return read_dev_api_key(Settings())


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        for _number, spec in args.callee:
            parse_callee(spec)  # a bad file is said before anything is served
        asyncio.run(_serve_until_stopped(args))
    except CalleeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
