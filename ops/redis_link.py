"""The Redis connection several pods share, and one log line per outage (not per event)."""

from __future__ import annotations

import redis.asyncio as aioredis
from loguru import logger

CONNECT_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 2.0


def connect(url: str) -> aioredis.Redis:
    """A client with short timeouts: a Redis that hangs must not hang an API request."""
    return aioredis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=COMMAND_TIMEOUT_S,
        decode_responses=False, health_check_interval=10,
    )


class Outage:
    """Tracks whether Redis answers; logs when it stops and when it comes back, once each."""

    def __init__(self, what: str) -> None:
        self._what = what
        self.down = False
        self.failures = 0

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        if not self.down:
            self.down = True
            logger.warning(f"{self._what}: Redis unavailable ({type(error).__name__}); "
                           "calls go on, live events are dropped until it returns")

    def ok(self) -> None:
        if self.down:
            self.down = False
            logger.info(f"{self._what}: Redis reachable again")
