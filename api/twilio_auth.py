"""Twilio webhook authentication: `X-Twilio-Signature` checked with Twilio's own validator.

The signature covers the exact public URL Twilio requested plus the form fields,
so behind a proxy or tunnel `PUBLIC_URL` must be set to what Twilio sees. Twilio signs
the media stream's WebSocket upgrade the same way: over the `wss://` URL it opened
(query included), with no fields.
"""

from __future__ import annotations

from fastapi import HTTPException, Request, WebSocket, status
from loguru import logger
from twilio.request_validator import RequestValidator

from config import Settings
from runner.dev_credentials import twilio_auth_token


def public_request_url(request: Request, settings: Settings) -> str:
    """The URL as Twilio requested it: PUBLIC_URL + path + query, else the request's own URL."""
    if settings.server.public_url:
        url = settings.server.public_url.rstrip("/") + request.url.path
        return f"{url}?{request.url.query}" if request.url.query else url
    return str(request.url)


def media_stream_url(request: Request, settings: Settings) -> str:
    """Where Twilio should open the media stream (wss:// behind TLS)."""
    public_url = settings.server.public_url
    base = public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + "/ws"
    return "ws://" + base.removeprefix("http://") + "/ws"


async def verified_form(request: Request, settings: Settings) -> dict[str, str]:
    """The webhook's form fields, after the signature check (403 when missing or wrong)."""
    form = {key: str(value) for key, value in (await request.form()).items()}
    if not settings.telephony.twilio_validate_signature:
        return form
    signature = request.headers.get("x-twilio-signature")
    if not signature:
        logger.warning(f"twilio webhook {request.url.path}: missing signature")
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing X-Twilio-Signature")
    validator = RequestValidator(twilio_auth_token(settings))
    if not validator.validate(public_request_url(request, settings), form, signature):
        logger.warning(f"twilio webhook {request.url.path}: invalid signature")
        raise HTTPException(status.HTTP_403_FORBIDDEN, "invalid X-Twilio-Signature")
    return form


def public_websocket_url(websocket: WebSocket, settings: Settings) -> str:
    """The URL as Twilio opened it: PUBLIC_URL as ws(s):// + path + query, else the
    socket's own URL."""
    public_url = settings.server.public_url
    if not public_url:
        return str(websocket.url)
    base = public_url.rstrip("/")
    base = ("wss://" + base.removeprefix("https://") if base.startswith("https://")
            else "ws://" + base.removeprefix("http://"))
    url = base + websocket.url.path
    return f"{url}?{websocket.url.query}" if websocket.url.query else url


def websocket_signed(websocket: WebSocket, settings: Settings) -> bool:
    """Whether a WebSocket upgrade carries Twilio's signature over the URL it opened (always
    True when `TWILIO_VALIDATE_SIGNATURE=false`)."""
    if not settings.telephony.twilio_validate_signature:
        return True
    signature = websocket.headers.get("x-twilio-signature")
    if not signature:
        return False
    validator = RequestValidator(twilio_auth_token(settings))
    return validator.validate(public_websocket_url(websocket, settings), {}, signature)
