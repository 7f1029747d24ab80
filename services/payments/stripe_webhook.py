"""Stripe's webhook signature: is this event really from Stripe, and recent?

Stripe signs each event it posts with the endpoint's secret (whsec_…) in the
`Stripe-Signature` header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`,
with more than one `v1` while a secret is being rolled (any one matching is enough) and
other schemes to ignore. The timestamp is signed too, so an event older (or further in
the future) than the tolerance is refused: a captured request cannot be replayed later.
The body must be checked exactly as received, before any parsing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Any

from pydantic import TypeAdapter, ValidationError

TOLERANCE_S = 300  # Stripe's own libraries' default
EVENT = TypeAdapter(dict[str, Any])


class WebhookRejected(Exception):
    """Not a Stripe event to act on; `reason` says why in plain words (no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def verify_webhook(payload: bytes, signature_header: str, secret: str, *,
                   tolerance_s: float = TOLERANCE_S) -> dict[str, Any]:
    """The event in `payload` once its signature and timestamp check out; else
    `WebhookRejected`."""
    timestamp, signatures = _parse(signature_header)
    if abs(time.time() - timestamp) > tolerance_s:
        raise WebhookRejected("the signature's timestamp is outside the tolerance")
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload,
                        hashlib.sha256).hexdigest().encode()
    if not any(hmac.compare_digest(expected, given.encode()) for given in signatures):
        raise WebhookRejected("no v1 signature matches the body and the secret")
    try:
        return EVENT.validate_json(payload)
    except ValidationError:
        raise WebhookRejected("the body is not a JSON object") from None


def _parse(header: str) -> tuple[int, list[str]]:
    """The header's timestamp and its v1 signatures."""
    timestamps: list[str] = []
    signatures: list[str] = []
    for item in header.split(","):
        scheme, _, value = item.strip().partition("=")
        if scheme == "t":
            timestamps.append(value)
        elif scheme == "v1":
            signatures.append(value)
    if len(timestamps) != 1 or not re.fullmatch(r"[0-9]{1,12}", timestamps[0]):
        raise WebhookRejected("the signature header has no single timestamp")
    if not signatures:
        raise WebhookRejected("the signature header has no v1 signature")
    return int(timestamps[0]), signatures


__all__ = ["WebhookRejected", "verify_webhook"]
