"""What has been said in a call so far: topics, the agent's questions and advice, and a
rolling transcript.

Fed with finished turns by the call recorder (the one place that knows a turn's final
spoken text) and with topics by the observers; read by the conversation director for
its analysis, by prompts through `summary()`, and by post-call work.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, field_validator

from language.patterns import any_of, valid_regex

MAX_TURNS = 40
MAX_LISTED = 5  # questions, advice and topics named in a summary
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
# Two questions are the same question asked again when their words are this alike
# (difflib's ratio) or their subject words, fillers left out, overlap this much
# (Jaccard): "What day or time suits you best?" and "So what day or time suits you
# best?" are; so are "And your date of birth, please?" and "Sorry, what is your date of
# birth?"; "And your last name?" and "What's your first name?" are not.
SAME_QUESTION_RATIO = 0.85
SAME_SUBJECT_OVERLAP = 0.75
_NOT_A_WORD = re.compile(r"[^\w' ]+")
WORDS_FILE = Path(__file__).resolve().parent / "data" / "tracker_words.yaml"


class TrackerWords(BaseModel):
    filler: frozenset[str] = Field(min_length=1)
    advice: list[str] = Field(min_length=1)

    @field_validator("advice")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return [valid_regex(pattern) for pattern in patterns]


@lru_cache(maxsize=1)
def tracker_words(path: Path = WORDS_FILE) -> TrackerWords:
    """The tracker's word lists (validated at first use)."""
    return TrackerWords.model_validate(yaml.safe_load(path.read_text()))


@lru_cache(maxsize=1)
def advice_pattern() -> re.Pattern[str]:
    """What counts as advice in the agent's words, whatever its capitals."""
    return re.compile(any_of(tracker_words().advice), re.IGNORECASE)


@lru_cache(maxsize=1)
def question_fillers() -> frozenset[str]:
    """The words that do not change what a question asks (validated at first use)."""
    return frozenset(word.lower() for word in tracker_words().filler)

Speaker = Literal["caller", "agent"]


@dataclass(frozen=True)
class TrackedTurn:
    speaker: Speaker
    text: str


@dataclass(frozen=True)
class RepeatedQuestion:
    """The agent asked the question of its previous turn again: `in_a_row` is how many
    times it has now asked it without asking anything else (2 on the first repeat),
    `total` the repeats in the call so far."""

    in_a_row: int
    total: int


def asking_question(text: str) -> str | None:
    """The question an agent turn leaves the caller to answer (its last one), normalized
    to lower-case words; None when the turn asks nothing."""
    questions = [s.strip() for s in _SENTENCE.findall(text) if s.strip().endswith("?")]
    if not questions:
        return None
    return " ".join(_NOT_A_WORD.sub(" ", questions[-1].lower()).split()) or None


def same_question(first: str, second: str) -> bool:
    """Whether two normalized questions are the same question, word for word or nearly."""
    if first == second or SequenceMatcher(None, first, second).ratio() >= SAME_QUESTION_RATIO:
        return True
    fillers = question_fillers()
    one, other = (set(q.split()) - fillers for q in (first, second))
    if not one or not other:
        return False
    return len(one & other) / len(one | other) >= SAME_SUBJECT_OVERLAP


class ConversationTracker:
    """One call's conversation so far (in memory, bounded)."""

    def __init__(self, max_turns: int = MAX_TURNS) -> None:
        self.turns: deque[TrackedTurn] = deque(maxlen=max_turns)
        self.topics: Counter[str] = Counter()
        self.questions: list[str] = []
        self.advice: list[str] = []
        self.repeated_questions = 0  # the agent asked its previous question again
        self._last_question: str | None = None
        self._in_a_row = 0

    def caller_said(self, text: str) -> None:
        if text.strip():
            self.turns.append(TrackedTurn("caller", text.strip()))

    def agent_said(self, text: str) -> RepeatedQuestion | None:
        """Track an agent turn; whether it asks the previous turn's question again.

        A turn that asks nothing (an answer, a filler) leaves the row as it was: the
        question is still the one waiting for the caller.
        """
        text = text.strip()
        if not text:
            return None
        self.turns.append(TrackedTurn("agent", text))
        advice = advice_pattern()
        for sentence in (s.strip() for s in _SENTENCE.findall(text)):
            if sentence.endswith("?") and sentence not in self.questions:
                self.questions.append(sentence)
            elif advice.search(sentence) and sentence not in self.advice:
                self.advice.append(sentence)
        return self._count_repeat(asking_question(text))

    def _count_repeat(self, question: str | None) -> RepeatedQuestion | None:
        if question is None:
            return None
        previous, self._last_question = self._last_question, question
        if previous is None or not same_question(previous, question):
            self._in_a_row = 1
            return None
        self._in_a_row += 1
        self.repeated_questions += 1
        return RepeatedQuestion(self._in_a_row, self.repeated_questions)

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
