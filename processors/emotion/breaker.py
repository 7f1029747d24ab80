"""The emotion provider's circuit breaker.

Two failures in a row open it for 10 s (no requests: the voice path never waits on a
sick provider); then one request is let through (half-open): a success closes it, a
failure opens it again. Five failures in a row disable emotion detection for the rest
of the call. Every change of state is reported (`on_change`) for the call record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

OPEN_AFTER = 2
OPEN_FOR_S = 10.0
DISABLE_AFTER = 5


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    DISABLED = "disabled"


class CircuitBreaker:
    def __init__(
        self, *, open_after: int = OPEN_AFTER, open_for_s: float = OPEN_FOR_S,
        disable_after: int = DISABLE_AFTER, clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[BreakerState, str], None] | None = None,
    ) -> None:
        self.open_after, self.open_for_s, self.disable_after = open_after, open_for_s, disable_after
        self.clock = clock
        self.on_change = on_change
        self.state = BreakerState.CLOSED
        self.consecutive_failures = 0
        self._opened_at = 0.0

    def allow(self) -> bool:
        """Whether a request may go to the provider now."""
        if self.state is BreakerState.OPEN and self.clock() - self._opened_at >= self.open_for_s:
            self._move(BreakerState.HALF_OPEN, "recovery window over")
        return self.state in (BreakerState.CLOSED, BreakerState.HALF_OPEN)

    def success(self) -> None:
        self.consecutive_failures = 0
        if self.state is BreakerState.HALF_OPEN:
            self._move(BreakerState.CLOSED, "provider answered")

    def failure(self, reason: str) -> None:
        if self.state is BreakerState.DISABLED:
            return
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.disable_after:
            self._move(BreakerState.DISABLED, f"{self.consecutive_failures} failures in a row: {reason}")
        elif self.state is BreakerState.HALF_OPEN or self.consecutive_failures >= self.open_after:
            self._opened_at = self.clock()
            self._move(BreakerState.OPEN, reason)

    def disable(self, reason: str) -> None:
        """Give up for this call (auth, billing, a connect timeout)."""
        self._move(BreakerState.DISABLED, reason)

    def _move(self, state: BreakerState, reason: str) -> None:
        if state is self.state and state is not BreakerState.OPEN:
            return
        self.state = state
        if self.on_change is not None:
            self.on_change(state, reason)
