"""A Twilio phone number pointed at this service, through Twilio's REST API (twilio SDK).

The account's IncomingPhoneNumber with the number gets its voice webhook and its status
callback (both POST); what Twilio reported back is returned. Knows nothing of clinics
or the database: the caller records the number where it belongs.

Another REST base URL (`TWILIO_API_BASE_URL`, e.g. a local stand-in in tests) goes
through the SDK's documented extension point, a custom HTTP client, which sends each
request for `https://api.twilio.com` to that base instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import requests
from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client

TWILIO_API = "https://api.twilio.com"
REQUEST_TIMEOUT_S = 10.0
# Twilio's "Authenticate" error: the account SID or auth token is wrong.
TWILIO_AUTHENTICATE = 20003


@dataclass(frozen=True)
class TwilioAccount:
    """Whose numbers, and where their REST API answers (None: Twilio's own)."""

    account_sid: str
    auth_token: str
    base_url: str | None = None
    timeout_s: float = REQUEST_TIMEOUT_S


@dataclass(frozen=True)
class ConnectedNumber:
    """The number as Twilio reported it after the update."""

    sid: str
    phone_number: str
    voice_url: str
    voice_method: str
    status_callback: str
    status_callback_method: str
    sms_url: str | None = None  # where texts to the number are posted (STOP and START)


class TwilioNumberError(Exception):
    """The number could not be connected; `kind` says why (`credentials`, `not_found`,
    `unreachable`, `refused`) and the message says it plainly."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RebasedHttpClient(TwilioHttpClient):
    """The SDK's HTTP client, sending Twilio's REST requests to another base URL."""

    def __init__(self, base_url: str, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self.base_url = base_url.rstrip("/")

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        if url.startswith(TWILIO_API):
            url = self.base_url + url[len(TWILIO_API):]
        return super().request(method, url, *args, **kwargs)


def rest_base(account: TwilioAccount) -> str:
    """Where the account's REST API answers."""
    return (account.base_url or TWILIO_API).rstrip("/")


def rest_client(account: TwilioAccount) -> Client:
    """The SDK client for the account, rebased when the API answers elsewhere."""
    base = rest_base(account)
    http = (RebasedHttpClient(base, account.timeout_s) if base != TWILIO_API
            else TwilioHttpClient(timeout=account.timeout_s))
    return Client(account.account_sid, account.auth_token, http_client=http)


def connect_number(account: TwilioAccount, phone_number: str, *, voice_url: str,
                   status_url: str, sms_url: str | None = None) -> ConnectedNumber:
    """Point the account's number `phone_number` (E.164) at `voice_url` and `status_url`
    (and the texts sent to it at `sms_url`). Blocking (the SDK is synchronous); raises
    TwilioNumberError."""
    base = rest_base(account)
    numbers = rest_client(account).api.v2010.accounts(account.account_sid).incoming_phone_numbers
    try:
        found = numbers.list(phone_number=phone_number, limit=1)
        if not found:
            raise TwilioNumberError(
                "not_found", f"Twilio account {account.account_sid} has no number "
                f"{phone_number} (buy or port it into this account first)")
        texts = {"sms_url": sms_url, "sms_method": "POST"} if sms_url else {}
        updated = numbers(found[0].sid).update(
            voice_url=voice_url, voice_method="POST",
            status_callback=status_url, status_callback_method="POST", **texts)
    except requests.RequestException as error:
        raise TwilioNumberError(
            "unreachable", f"cannot reach Twilio at {base} ({type(error).__name__})") from error
    except TwilioException as error:
        raise _explained(error, account, phone_number) from error
    return ConnectedNumber(
        sid=updated.sid, phone_number=updated.phone_number, voice_url=updated.voice_url,
        voice_method=updated.voice_method, status_callback=updated.status_callback,
        status_callback_method=updated.status_callback_method,
        sms_url=updated.sms_url or None)


def _explained(error: TwilioException, account: TwilioAccount,
               phone_number: str) -> TwilioNumberError:
    """What Twilio's refusal means for the operator."""
    status, code, message = refusal(error)
    if status == 401 or code == TWILIO_AUTHENTICATE:
        return TwilioNumberError(
            "credentials", f"Twilio refused the credentials for account {account.account_sid} "
            "(check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN)")
    if status == 404:
        return TwilioNumberError(
            "not_found", f"Twilio account {account.account_sid} has no number {phone_number}")
    detail = f": {message}" if message else ""
    return TwilioNumberError(
        "refused", f"Twilio refused the change (HTTP {status}, code {code}){detail}")


def refusal(error: TwilioException) -> tuple[int | None, int | None, str]:
    """HTTP status, Twilio error code and message of a refusal. A list the SDK could not
    page through carries Twilio's response instead of a parsed error."""
    if isinstance(error, TwilioRestException):
        return error.status, error.code, str(error.msg or "")
    response = next((arg for arg in error.args if isinstance(arg, Response)), None)
    if response is None:
        return None, None, str(error)
    try:
        body = json.loads(response.text)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return response.status_code, body.get("code"), str(body.get("message") or "")
