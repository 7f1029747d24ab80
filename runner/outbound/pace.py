"""How fast one process dials: each dial gets a turn, `1 / per_second` after the one
before, so a burst of due tasks (a reminder campaign, a backlog after a restart) goes out
at a steady rate and never crowds out the callers the process is serving.

A task whose turn is later waits for it outside the job worker (its job runs again at the
turn) and keeps it: coming back at or after its turn, it dials. A turn nobody came back
for (the job ran in another process) lapses after a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

LAPSE_AFTER = timedelta(minutes=1)


@dataclass
class DialPace:
    per_second: float
    _next: datetime | None = None
    _held: dict[str, datetime] = field(default_factory=dict)

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=1 / self.per_second)

    @property
    def waiting(self) -> int:
        """Turns given out and not used yet."""
        return len(self._held)

    def wait(self, task_id: str, now: datetime) -> timedelta:
        """How long `task_id` waits for its turn; zero means dial now (the turn is used)."""
        self._lapse(now)
        turn = self._held.pop(task_id, None)
        if turn is None:
            turn = max(now, self._next or now)
            self._next = turn + self.interval
        if turn <= now:
            return timedelta(0)
        self._held[task_id] = turn
        return turn - now

    def _lapse(self, now: datetime) -> None:
        for task_id in [t for t, turn in self._held.items() if turn < now - LAPSE_AFTER]:
            del self._held[task_id]


__all__ = ["DialPace"]
