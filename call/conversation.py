"""The conversation state the observer layers share within one call.

One typed object (no dict of string keys), each field with one writer:

- `goodbye_in_progress`: the quick observer, when a strong goodbye is scheduled to end
  the call; the director and the silence monitor hold back while it is set.
- `suspended`, `escalated_on`: the safety monitor, when a hard escalation hands the call
  to a human; nothing generates or checks in while it is set.
- `winding_down`: the director's time fallback.
- `tracker`: the call recorder (turns) and the quick observer (topics).
- `last_observation`, `final_transcripts`: the quick observer.
- `answering`: the agent gate, as it lets a caller turn through (the supersede guard).
- `interrupted_reply`: the call recorder, when the caller cuts the agent off; the quick
  observer turns it into the next turn's interruption context and clears it.
- `agent_replies`: the reply guard, as each reply of the agent begins (a short answer the
  caller said over an earlier reply is out of date once a newer one began).
- `final_transcripts` is taken back by one (`not_a_turn`) by the barge-in strategy when
  words under the agent's voice were only a backchannel: they never make a reply stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from call.conversation_tracker import ConversationTracker

Clock = Callable[[], float]
GoodbyeStrength = Literal["strong", "weak"]
Engagement = Literal["low", "medium", "high"]


@dataclass(frozen=True)
class Signal:
    """One pattern that matched: what it means, never the caller's words."""

    category: str
    id: str
    tag: str
    priority: int
    guidance: str
    tokens: int
    valence: float | None = None
    intensity: float | None = None
    strength: GoodbyeStrength | None = None
    clause_start: bool = False
    holds_call: bool = False
    escalate: str | None = None


@dataclass(frozen=True)
class Observation:
    """What the quick observer made of one caller turn."""

    signals: tuple[Signal, ...]
    # None also when a goodbye was taken back, or said in a turn that holds the call open
    goodbye: GoodbyeStrength | None
    false_goodbye: bool
    engagement: Engagement
    guidance: str | None  # may hold $emergency_number: see `render_guidance`
    tokens: int

    @property
    def categories(self) -> list[str]:
        return sorted({s.category for s in self.signals})

    @property
    def signal_ids(self) -> list[str]:
        return [s.id for s in self.signals]

    @property
    def holds_call(self) -> bool:
        return any(s.holds_call for s in self.signals)

    @property
    def escalations(self) -> list[str]:
        """The safety concepts this turn escalates on its own (their keys)."""
        return [s.escalate for s in self.signals if s.escalate is not None]


@dataclass
class ConversationState:
    clock: Clock = time.monotonic
    started_at: float = field(default=0.0)
    tracker: ConversationTracker = field(default_factory=ConversationTracker)
    goodbye_in_progress: bool = False
    suspended: bool = False
    escalated_on: str | None = None  # the caller's words that suspended the agent
    winding_down: bool = False
    barge_ins: int = 0
    final_transcripts: int = 0  # caller transcripts finalized so far
    answering: int = 0  # the count the agent's current reply answers
    agent_replies: int = 0  # replies the agent has begun
    interrupted_reply: str | None = None  # what the agent was saying when cut off
    # The quick observer's reading of the latest caller words (the director reuses it).
    last_observation: tuple[str, Observation] | None = None

    def __post_init__(self) -> None:
        if not self.started_at:
            self.started_at = self.clock()

    def elapsed_s(self) -> float:
        return self.clock() - self.started_at

    def restart_clock(self) -> None:
        """Call time starts with the media stream (as `CallLog.restart_clock`)."""
        self.started_at = self.clock()

    def suspend(self, on_words: str | None = None) -> bool:
        """Hand the call to a person: the agent says nothing more of its own. `on_words`:
        the caller's words that escalated (the holding line has answered them). Whether
        this suspended it (False: it already was)."""
        if self.suspended:
            return False
        self.suspended = True
        if on_words is not None:
            self.escalated_on = on_words
        return True

    def resume(self) -> None:
        """The agent takes the call back."""
        self.suspended = False
        self.escalated_on = None

    def escalation_answered(self) -> None:
        """The turn that escalated has had its answer (the holding line)."""
        self.escalated_on = None

    def reply_interrupted(self, said: str | None) -> None:
        """The caller cut the agent off while it said `said`."""
        self.interrupted_reply = said

    def take_interrupted_reply(self) -> str | None:
        """What the agent was saying when last cut off, once (for the next turn's context)."""
        said, self.interrupted_reply = self.interrupted_reply, None
        return said

    def count_final_transcript(self) -> None:
        """The caller finished more words (newer than any reply started before them)."""
        self.final_transcripts += 1

    def not_a_turn(self, transcripts: int = 1) -> None:
        """Finalized words that turned out to be only a backchannel under the agent's
        voice: they do not count as newer caller words."""
        self.final_transcripts = max(0, self.final_transcripts - transcripts)

    @property
    def holding_back(self) -> bool:
        """Ending or handed to a human: no guidance, no check-ins, no forced endings."""
        return self.goodbye_in_progress or self.suspended
