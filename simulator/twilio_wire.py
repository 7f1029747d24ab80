"""How the Twilio stand-in reaches the service: webhooks signed as Twilio signs them and
kept for tests, over one shared TLS context, with Twilio's RFC 2822 dates.

Shared by the placed calls (simulator/outbound_callee.py), the TwiML a call runs
(simulator/twiml_run.py) and the conferences (simulator/twilio_conference.py), so each
posts and records its webhooks the same way.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
from loguru import logger
from twilio.request_validator import RequestValidator

from simulator.simulator import send_signed


@dataclass(frozen=True)
class Sent:
    """A webhook request the stand-in made: `kind` is `status`, `voice` or `conference`;
    `status_code` None when it could not be delivered."""

    kind: str
    call_sid: str
    method: str
    url: str
    params: dict[str, str]
    status_code: int | None


def rfc2822(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def now_rfc2822() -> str:
    return rfc2822(datetime.now(UTC))


@functools.cache
def webhook_tls() -> ssl.SSLContext:
    """One TLS context for every webhook and stream: building one reads the CA bundle,
    about 40 ms of the event loop, which would cap how fast the stand-in places calls."""
    return httpx.create_ssl_context()


async def deliver(http: httpx.AsyncClient, validator: RequestValidator, sent: list[Sent], *,
                  kind: str, call_sid: str, url: str, params: dict[str, str],
                  method: str = "POST") -> httpx.Response | None:
    """Send one signed webhook and keep it in `sent`; None when it could not be delivered
    (Twilio logs that and goes on)."""
    try:
        response = await send_signed(http, validator, url, params, method)
    except httpx.HTTPError as error:
        logger.warning(f"twilio stand-in: {kind} webhook not delivered ({type(error).__name__})")
        sent.append(Sent(kind, call_sid, method.upper(), url, params, None))
        return None
    sent.append(Sent(kind, call_sid, method.upper(), url, params, response.status_code))
    return response
