"""Short answers said while the agent is still talking: kept, then answered (plain rules).

While the agent speaks, words too short to take the floor (turns/barge_in)
are one of two things. A backchannel ("mm-hm", "okay", "right"; `data/overlap_words.yaml`)
only shows the caller is listening and never becomes a turn. Anything else is an answer
said early ("yes", "Tuesday", "the second one", "mm no"): it is kept, and once the agent
has finished (and stayed silent `settle_s`, or the caller starts speaking again) it
becomes the caller's turn, joined with whatever they go on to say.

A kept answer expires when the conversation has moved on:

- `agent_moved_on`: the agent began another reply (a new question) before the answer
  could be taken;
- `too_old`: it was said more than `max_age_s` before it could be taken;
- `superseded`: the caller's next words replace it ("no, Wednesday" after "Tuesday");
- `call_ending` / `held`: the call is ending, or a person is taking it over.

Pure logic over a clock; the turn start strategy (turns/semantic_barge_in_user_turn_start_strategy.py) does
the frames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, field_validator

from language.phrases import normalize

DATA_FILE = Path(__file__).resolve().parent / "data" / "overlap_words.yaml"

MAX_AGE_S = 8.0
SETTLE_S = 0.4
MAX_FRAGMENTS = 4
_NOT_A_WORD = re.compile(r"[^\w' ]+")


def plain_words(text: str) -> str:
    """Lower case, punctuation and hyphens out, single spaces ("Mm-hmm." → "mm hmm")."""
    return " ".join(_NOT_A_WORD.sub(" ", normalize(text)).split())


def _alternatives(phrases: list[str]) -> str:
    parts = [phrase[3:] if phrase.startswith("re:") else re.escape(plain_words(phrase))
             for phrase in phrases]
    parts.sort(key=len, reverse=True)
    return "|".join(f"(?:{part})" for part in parts)


class OverlapPhrases(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backchannels: list[str]
    corrections: list[str]

    @field_validator("backchannels", "corrections")
    @classmethod
    def _valid(cls, phrases: list[str]) -> list[str]:
        cleaned = [p.strip() for p in phrases if p and p.strip()]
        if not cleaned:
            raise ValueError("phrase list must not be empty")
        for phrase in cleaned:
            if phrase.startswith("re:"):
                try:
                    re.compile(phrase[3:])
                except re.error as error:
                    raise ValueError(f"bad pattern {phrase!r}: {error}") from None
        return cleaned


class OverlapWords:
    """Reads what was said over the agent's voice."""

    def __init__(self, phrases: OverlapPhrases) -> None:
        backchannel = _alternatives(phrases.backchannels)
        self._only_backchannels = re.compile(rf"(?:{backchannel})(?: (?:{backchannel}))*")
        self._correction = re.compile(rf"(?:{_alternatives(phrases.corrections)})(?![\w'])")

    def is_backchannel(self, text: str) -> bool:
        """Nothing but listening noises (an empty utterance is one too)."""
        words = plain_words(text)
        return not words or self._only_backchannels.fullmatch(words) is not None

    def replaces(self, text: str) -> bool:
        """Newer words that start by taking back what came before."""
        return self._correction.match(plain_words(text)) is not None


@lru_cache(maxsize=1)
def overlap_words(path: Path = DATA_FILE) -> OverlapWords:
    """The bundled phrases, validated and compiled once."""
    return OverlapWords(OverlapPhrases.model_validate(yaml.safe_load(path.read_text("utf-8"))))


@dataclass(frozen=True)
class Fragment:
    """Words kept from one short utterance under the agent's voice."""

    text: str
    at: float
    reply: int  # which agent reply it was said over (ConversationState.agent_replies)


@dataclass(frozen=True)
class Expiry:
    fragments: int
    why: str
    age_s: float


@dataclass(frozen=True)
class Taken:
    """Kept words that become (the start of) the caller's turn."""

    text: str
    fragments: int
    age_s: float


@dataclass
class DeferredTurns:
    max_age_s: float = MAX_AGE_S
    settle_s: float = SETTLE_S
    max_fragments: int = MAX_FRAGMENTS
    pending: list[Fragment] = field(default_factory=list)
    agent_done_at: float | None = None  # the agent stopped speaking (None: speaking)

    def keep(self, text: str, now: float, reply: int) -> Expiry | None:
        """Keep an early answer; past `max_fragments` the oldest goes."""
        self.pending.append(Fragment(text.strip(), now, reply))
        if len(self.pending) <= self.max_fragments:
            return None
        oldest = self.pending.pop(0)
        return Expiry(1, "too_many", round(now - oldest.at, 1))

    def agent_started(self, now: float, reply: int) -> Expiry | None:
        """The agent speaks again: if it is saying something new, the answers kept over
        the earlier reply are out of date."""
        self.agent_done_at = None
        if self.pending and any(f.reply < reply for f in self.pending):
            return self.drop(now, "agent_moved_on")
        return None

    def agent_stopped(self, now: float) -> None:
        self.agent_done_at = now

    def due(self, now: float) -> bool:
        """The agent has finished and stayed silent long enough: take the answers now."""
        return (bool(self.pending) and self.agent_done_at is not None
                and now - self.agent_done_at >= self.settle_s)

    def take(self, now: float, reply: int) -> tuple[Taken | None, list[Expiry]]:
        """What is still worth answering, and what expired on the way."""
        fresh = [f for f in self.pending if now - f.at <= self.max_age_s]
        current = [f for f in fresh if f.reply >= reply]
        expired = []
        if old := len(self.pending) - len(fresh):
            expired.append(Expiry(old, "too_old", round(now - self.pending[0].at, 1)))
        if moved := len(fresh) - len(current):
            expired.append(Expiry(moved, "agent_moved_on", round(now - fresh[0].at, 1)))
        self.pending = []
        if not current:
            return None, expired
        taken = Taken(" ".join(f.text for f in current), len(current),
                      round(now - current[0].at, 1))
        return taken, expired

    def drop(self, now: float, why: str) -> Expiry | None:
        """Every kept answer expires (the call is ending, a person takes over, ...)."""
        if not self.pending:
            return None
        expiry = Expiry(len(self.pending), why, round(now - self.pending[0].at, 1))
        self.pending = []
        return expiry
