"""The one reader of the `Authorization` header: the rate limiter and authentication both
use it, so a key counts against its limit exactly when it is the key that authenticates."""

from __future__ import annotations

BEARER = "bearer"


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer <key>` value, None when there is none.

    The scheme is case-insensitive and any run of spaces or tabs separates it from the
    key (RFC 9110); the key is one token, so anything else (no key, a second word,
    another scheme) is no key at all.
    """
    parts = (authorization or "").split()
    if len(parts) != 2 or parts[0].lower() != BEARER:
        return None
    return parts[1]
