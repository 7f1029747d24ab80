"""Twilio webhook authentication: `X-Twilio-Signature` checked with Twilio's own validator.

The signature covers the exact public URL Twilio requested plus the form fields,
so behind a proxy or tunnel `PUBLIC_URL` must be set to what Twilio sees.
"""

from __future__ import annotations

from fastapi import HTTPException, Request, status
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
