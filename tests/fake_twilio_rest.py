"""A local stand-in for Twilio's REST API: the IncomingPhoneNumbers resource
services/twilio/numbers.py uses, in the shapes Twilio documents
(twilio.com/docs/phone-numbers/api/incomingphonenumber-resource, /docs/usage/requests-to-twilio,
/docs/errors).

In memory; a real HTTP server on 127.0.0.1 under `/2010-04-01`. Every request is
recorded (`requests`), then checked like Twilio does: HTTP Basic with the account SID and
auth token, else 401 with Twilio's error body `{code, message, more_info, status}`
(20003 "Authenticate"); a path naming another account, or an unknown number SID, is 404
(20404). Lists are Twilio's paged shape (`incoming_phone_numbers`, `page`, `page_size`,
`next_page_uri`...); an update takes form-encoded `VoiceUrl`, `VoiceMethod`,
`StatusCallback`, `StatusCallbackMethod` and answers with the whole resource; a method
other than GET or POST is a 400 (its code here is this fake's choice).

Run by hand to try `python main.py twilio connect` without a Twilio account:
`python -m tests.fake_twilio_rest +15550109001` serves an account owning that number
and prints the settings that point the command at it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from tests.local_http import serve_http

API = "/2010-04-01"
# Resource fields an update may set (form name → resource field).
UPDATABLE = {
    "VoiceUrl": "voice_url", "VoiceMethod": "voice_method",
    "StatusCallback": "status_callback", "StatusCallbackMethod": "status_callback_method",
    "FriendlyName": "friendly_name",
}
METHODS = {"GET", "POST"}


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]


@dataclass
class FakeTwilioRest:
    """One Twilio account for one test: add its numbers, then point the adapter at it."""

    account_sid: str = field(default_factory=lambda: "AC" + secrets.token_hex(16))
    auth_token: str = field(default_factory=lambda: secrets.token_hex(16))
    base_url: str = ""
    numbers: dict[str, dict[str, Any]] = field(default_factory=dict)  # by SID
    requests: list[Received] = field(default_factory=list)

    def add_number(self, phone_number: str, **fields: Any) -> str:
        """A number the account owns, pointed nowhere yet; its SID."""
        sid = "PN" + secrets.token_hex(16)
        now = format_datetime(datetime.now(UTC), usegmt=True)
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

    def updates(self) -> list[Received]:
        return [r for r in self.requests if r.method == "POST"]

    # --- HTTP -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        form = dict(await request.post()) if request.method == "POST" else {}
        self.requests.append(Received(request.method, request.path, dict(request.query),
                                      {k: str(v) for k, v in form.items()}))
        if not self._authenticated(request):
            return _error(401, 20003, "Authenticate")
        account = re.escape(self.account_sid)
        listing = re.fullmatch(rf"{API}/Accounts/{account}/IncomingPhoneNumbers\.json",
                               request.path)
        one = re.fullmatch(rf"{API}/Accounts/{account}/IncomingPhoneNumbers/(PN\w+)\.json",
                           request.path)
        if listing and request.method == "GET":
            return self._list(request)
        if one and request.method == "GET" and one.group(1) in self.numbers:
            return web.json_response(self.numbers[one.group(1)])
        if one and request.method == "POST" and one.group(1) in self.numbers:
            return self._update(one.group(1), form)
        return _error(404, 20404, f"The requested resource {request.path} was not found")

    def _authenticated(self, request: web.Request) -> bool:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return scheme == "Basic" and (user, password) == (self.account_sid, self.auth_token)

    def _list(self, request: web.Request) -> web.Response:
        wanted = request.query.get("PhoneNumber")
        page_size = int(request.query.get("PageSize", "50"))
        found = [n for n in self.numbers.values()
                 if wanted is None or n["phone_number"] == wanted][:page_size]
        query = {k: v for k, v in request.query.items() if k not in ("Page", "PageToken")}
        uri = f"{request.path}?{urlencode({**query, 'PageSize': page_size, 'Page': 0})}"
        return web.json_response({
            "incoming_phone_numbers": found, "end": max(len(found) - 1, 0),
            "first_page_uri": uri, "next_page_uri": None, "page": 0, "page_size": page_size,
            "previous_page_uri": None, "start": 0, "uri": uri,
        })

    def _update(self, sid: str, form: Any) -> web.Response:
        for name in ("VoiceMethod", "StatusCallbackMethod"):
            if name in form and str(form[name]).upper() not in METHODS:
                return _error(400, 21200, f"{name} must be GET or POST")
        number = self.numbers[sid]
        for name, value in form.items():
            if name in UPDATABLE:
                number[UPDATABLE[name]] = str(value)
        number["date_updated"] = format_datetime(datetime.now(UTC), usegmt=True)
        return web.json_response(number)


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message,
                              "more_info": f"https://www.twilio.com/docs/errors/{code}",
                              "status": status}, status=status)


@asynccontextmanager
async def serve_twilio_rest(fake: FakeTwilioRest) -> AsyncIterator[str]:
    """Serve the fake on a free loopback port; yields the base URL to configure
    (`TWILIO_API_BASE_URL`, Twilio's `https://api.twilio.com` in production)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    async with serve_http(app) as root:
        fake.base_url = root
        yield root


async def _serve_until_stopped(numbers: list[str], port: int) -> None:
    fake = FakeTwilioRest()
    for number in numbers:
        fake.add_number(number)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    print(f"export TWILIO_API_BASE_URL=http://127.0.0.1:{bound}\n"
          f"export TWILIO_ACCOUNT_SID={fake.account_sid}\n"
          f"export TWILIO_AUTH_TOKEN={fake.auth_token}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a local stand-in for Twilio's REST API")
    parser.add_argument("numbers", nargs="+", help="numbers the account owns (E.164)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_until_stopped(args.numbers, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
