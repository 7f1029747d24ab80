"""Write safety for the agent's tools: patient isolation, no double writes, an intent gate.

- `target_outside_scope`: a write may only name the patient this call identified; any
  other id or reference is refused (and the tool layer records it).
- `WriteDeduplicator`: the same write with the same arguments within 30 s returns the
  first result instead of writing twice; only successes are kept, so a failure can
  always be retried.
- `quote_problem` (the intent gate): a tool that changes preferences or deletes must
  carry `user_quote`, words the caller actually said in the last few turns; a quote
  that is too short, or that matches nothing they said, blocks the write and the
  model is told why.
- `visible_tools`: the tool surface by session mode: an unidentified caller is offered
  no write tool except those marked for unidentified callers (creating a patient).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rapidfuzz import fuzz

from language.understanding import spoken_numbers_to_digits

DEDUP_TTL_S = 30.0
QUOTE_MIN_CHARS = 12
QUOTE_MIN_WORDS = 3
QUOTE_RECENT_TURNS = 4
QUOTE_MIN_SCORE = 85.0
QUOTE_MAX_LENGTH_RATIO = 1.1  # a quote may not be longer than the words it quotes
SELF_REFERENCE = "P1"  # how tools and prompts name the identified caller's own record

Result = TypeVar("Result")


def target_outside_scope(args: Mapping[str, Any], identified_id: str | None) -> str | None:
    """Why this write names someone else (None: it names no one, or the caller)."""
    for key in ("patient_ref", "patient_id"):
        given = args.get(key)
        if given in (None, ""):
            continue
        if identified_id is None:
            return "no patient is identified on this call, so no record can be written"
        if str(given) not in (SELF_REFERENCE, identified_id):
            return "writes may only change the record of the patient identified on this call"
    return None


@dataclass
class WriteDeduplicator(Generic[Result]):
    """Successful writes by (tool, arguments), for `ttl_s` seconds, per call."""

    ttl_s: float = DEDUP_TTL_S
    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, tuple[float, Result]] = field(default_factory=dict)

    @staticmethod
    def key(tool: str, args: Mapping[str, Any]) -> str:
        return f"{tool}:{json.dumps(args, sort_keys=True, default=str)}"

    def cached(self, tool: str, args: Mapping[str, Any]) -> Result | None:
        key = self.key(tool, args)
        entry = self._seen.get(key)
        if entry is None:
            return None
        at, result = entry
        if self.clock() - at > self.ttl_s:
            del self._seen[key]
            return None
        return result

    def remember(self, tool: str, args: Mapping[str, Any], result: Result) -> None:
        self._seen[self.key(tool, args)] = (self.clock(), result)


def _plain(text: str) -> str:
    lowered = spoken_numbers_to_digits(text.lower())
    return " ".join(re.sub(r"[^\w@.' ]+", " ", lowered).split())


def quote_problem(quote: object, recent_caller_turns: Iterable[str]) -> str | None:
    """Why `quote` does not show the caller asked for this (None: it does)."""
    if not isinstance(quote, str) or not quote.strip():
        return "user_quote is required: quote the caller's own words asking for this"
    said = _plain(quote)
    if len(said) < QUOTE_MIN_CHARS or len(said.split()) < QUOTE_MIN_WORDS:
        return (f"user_quote is too short to show intent (at least {QUOTE_MIN_WORDS} words "
                "of what the caller said)")
    for turn in recent_caller_turns:
        heard = _plain(turn)
        if not heard or len(said) > len(heard) * QUOTE_MAX_LENGTH_RATIO + 2:
            continue  # longer than what they said: words were added
        # A part of the turn, or all of it, allowing for a misheard word or two.
        similarity = max(fuzz.partial_ratio(said, heard), fuzz.ratio(said, heard))
        if similarity >= QUOTE_MIN_SCORE:
            return None
    return ("the caller did not say that in the last few turns; ask them, and quote their "
            "words exactly")
