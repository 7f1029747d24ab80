"""One log line per outage of a shared backend (Redis, PostgreSQL), not one per event."""

from __future__ import annotations

from loguru import logger


class Outage:
    """Tracks whether the backend answers; logs when it stops and when it comes back,
    once each."""

    def __init__(self, what: str, backend: str = "Redis") -> None:
        self._what = what
        self._backend = backend
        self.down = False
        self.failures = 0

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        if not self.down:
            self.down = True
            logger.warning(f"{self._what}: {self._backend} unavailable "
                           f"({type(error).__name__}); calls go on, live events are dropped "
                           "until it returns")

    def ok(self) -> None:
        if self.down:
            self.down = False
            logger.info(f"{self._what}: {self._backend} reachable again")
