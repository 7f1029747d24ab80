"""When a silent caller is checked on, and when the agent gives up: check-ins at 10 s,
20 s and 40 s of silence, a brief goodbye after three unanswered.

Pure bookkeeping over a clock: the processor reports activity (either side speaking,
the caller's words) and asks `due()` what to do now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Due = Literal["checkin", "goodbye"]

DEFAULT_CHECKINS_S = (10.0, 20.0, 40.0)
DEFAULT_GOODBYE_AFTER_S = 10.0


@dataclass
class SilenceSchedule:
    """Silence is counted from the last activity; each check-in restarts the count.

    `checkins_s[i]` is how long the silence before check-in i+1 lasts; after the last
    check-in, `goodbye_after_s` more of silence ends the call. Any caller words reset
    the count of unanswered check-ins.
    """

    checkins_s: tuple[float, ...] = DEFAULT_CHECKINS_S
    goodbye_after_s: float = DEFAULT_GOODBYE_AFTER_S
    last_activity: float = 0.0
    unanswered: int = 0
    active: bool = False  # someone is speaking: no silence to count
    done: bool = field(default=False)

    def activity(self, now: float, *, speaking: bool | None = None) -> None:
        """Something was heard or said; `speaking` tells whether it is still going on."""
        self.last_activity = now
        if speaking is not None:
            self.active = speaking

    def caller_answered(self, now: float) -> None:
        self.unanswered = 0
        self.activity(now)

    def due(self, now: float) -> Due | None:
        """What the silence calls for now (None: nothing yet)."""
        if self.done or self.active:
            return None
        silent_for = now - self.last_activity
        if self.unanswered < len(self.checkins_s):
            return "checkin" if silent_for >= self.checkins_s[self.unanswered] else None
        return "goodbye" if silent_for >= self.goodbye_after_s else None

    def said(self, what: Due, now: float) -> None:
        """The agent said the check-in (or the goodbye) that was due."""
        if what == "goodbye":
            self.done = True
        else:
            self.unanswered += 1
        self.last_activity = now
