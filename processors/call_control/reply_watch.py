"""When a caller turn's answer has gone silent, and what to do about it (plain rules).

A caller turn handed to the agent should be answered out loud. The watch starts when
the turn is handed over and is settled when the answer is heard: the agent speaks after
the answer's words went to the voice (or is speaking when they do), or, in a text
session, the words went out. It stands aside while the agent runs a tool (the clock
starts again when the tool is done), and it is settled by anything that takes the floor
from the answer (the caller speaking again, the call ending or being handed to a human).

If `bound_s` passes unsettled, the answer gets one retry:

- `repeat`: its words went to the voice and nothing was heard: say them again;
- `regenerate`: the model finished an answer with no words to say (only notes, or only a
  tool call that led nowhere): ask it again;
- `wait`: nothing is ready yet (still navigating, still generating): give it one more
  `bound_s` — asking twice would answer the caller twice.

If another `bound_s` passes, a short fallback line is said instead, once per turn; never
silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

RetryPath = Literal["repeat", "regenerate", "wait"]
WatchStep = Literal["retry", "fallback"]


@dataclass
class ReplyWatch:
    bound_s: float
    armed_at: float | None = None  # when the current wait began (None: nothing owed)
    retried: bool = False
    words: list[str] = field(default_factory=list)  # the answer's words sent to the voice
    generating: bool = False  # a reply has started and not ended
    ended_empty: bool = False  # the latest reply ended without a word to say
    tools_running: int = 0

    @property
    def watching(self) -> bool:
        return self.armed_at is not None

    def arm(self, now: float) -> None:
        """A caller turn was handed to the agent: its answer is owed from now."""
        self.armed_at, self.retried = now, False
        self.words, self.generating, self.ended_empty = [], False, False

    def settle(self) -> None:
        """The answer was heard, or something else took the floor."""
        self.armed_at = None
        self.words, self.generating, self.ended_empty = [], False, False

    def reply_started(self) -> None:
        self.generating, self.ended_empty = True, False

    def reply_ended(self) -> None:
        self.ended_empty = self.generating and not self.words
        self.generating = False

    def reply_words(self, text: str) -> None:
        if text.strip():
            self.words.append(text)

    def tool_started(self) -> None:
        self.tools_running += 1

    def tool_done(self, now: float) -> None:
        self.tools_running = max(0, self.tools_running - 1)
        if self.watching and not self.tools_running:
            self.armed_at = now  # a fresh bound for the answer the tool's result leads to

    def due(self, now: float) -> WatchStep | None:
        """What the silence so far calls for (each step once per turn)."""
        if self.armed_at is None or self.tools_running or now - self.armed_at < self.bound_s:
            return None
        if not self.retried:
            self.retried, self.armed_at = True, now
            return "retry"
        self.settle()
        return "fallback"

    def retry_path(self, *, can_regenerate: bool) -> RetryPath:
        """How to retry: say the same words again, ask the model again, or wait."""
        if self.words:
            return "repeat"
        if self.ended_empty and can_regenerate:
            return "regenerate"
        return "wait"

    def text(self) -> str:
        return "".join(self.words).strip()
