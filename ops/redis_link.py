"""The Redis connection several pods share (its outages logged once each: `ops/outage.py`)."""

from __future__ import annotations

import redis.asyncio as aioredis

from ops.outage import Outage

__all__ = ["Outage", "connect"]

CONNECT_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 2.0


def connect(url: str) -> aioredis.Redis:
    """A client with short timeouts: a Redis that hangs must not hang an API request."""
    return aioredis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=COMMAND_TIMEOUT_S,
        decode_responses=False, health_check_interval=10,
    )
