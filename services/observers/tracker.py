"""What has been said in a call so far: topics, the agent's questions and advice, and a
rolling transcript (seed 003, "Conversation Tracker").

Fed with finished turns by the call recorder (the one place that knows a turn's final
spoken text) and with topics by the observers; read by the conversation director for
its analysis, by prompts through `summary()`, and by post-call work.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Literal

from services.observers.quick import quick_rules

MAX_TURNS = 40
MAX_LISTED = 5  # questions, advice and topics named in a summary
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")

Speaker = Literal["caller", "agent"]


@dataclass(frozen=True)
class TrackedTurn:
    speaker: Speaker
    text: str


class ConversationTracker:
    """One call's conversation so far (in memory, bounded)."""

    def __init__(self, max_turns: int = MAX_TURNS) -> None:
        self.turns: deque[TrackedTurn] = deque(maxlen=max_turns)
        self.topics: Counter[str] = Counter()
        self.questions: list[str] = []
        self.advice: list[str] = []

    def caller_said(self, text: str) -> None:
        if text.strip():
            self.turns.append(TrackedTurn("caller", text.strip()))

    def agent_said(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        self.turns.append(TrackedTurn("agent", text))
        advice = quick_rules().advice
        for sentence in (s.strip() for s in _SENTENCE.findall(text)):
            if sentence.endswith("?") and sentence not in self.questions:
                self.questions.append(sentence)
            elif advice.search(sentence) and sentence not in self.advice:
                self.advice.append(sentence)

    def add_topics(self, topics: list[str]) -> None:
        self.topics.update(topics)

    @property
    def caller_turns(self) -> int:
        return sum(1 for t in self.turns if t.speaker == "caller")

    def last_caller_words(self, turns: int = 3) -> list[int]:
        """Word counts of the caller's last `turns` turns, oldest first."""
        counts = [len(t.text.split()) for t in self.turns if t.speaker == "caller"]
        return counts[-turns:]

    def transcript(self, last: int | None = None) -> str:
        turns = list(self.turns)[-last:] if last else list(self.turns)
        return "\n".join(f"{'Caller' if t.speaker == 'caller' else 'Agent'}: {t.text}"
                         for t in turns)

    def summary(self) -> str:
        """A few lines for a prompt: what was talked about, asked and advised already."""
        lines = []
        if self.topics:
            named = ", ".join(t for t, _ in self.topics.most_common(MAX_LISTED))
            lines.append(f"Topics so far: {named}.")
        if self.questions:
            lines.append("Already asked: " + " | ".join(self.questions[-MAX_LISTED:]))
        if self.advice:
            lines.append("Already advised: " + " | ".join(self.advice[-MAX_LISTED:]))
        return "\n".join(lines)
