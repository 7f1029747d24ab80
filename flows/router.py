"""The deterministic router: the caller's words (and what the agent just asked) → a route.

The router's rules, as data (`flows/data/router_rules.yaml`): every decision carries the
route, its confidence and the evidence that fired it, so the call record can show why
the call went where it went. Plain functions: no I/O, microseconds per turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from language.phrases import normalize, phrase_pattern
from processors.conversation.quick_rules import quick_rules
from processors.safety.red_flags import RedFlagRecognizer, default_red_flags

RULES_FILE = Path(__file__).parent / "data" / "router_rules.yaml"
# The term list that is not phrases but the quick observer's farewell rules.
FAREWELL_TERMS = "caller_closing"


class Confidence(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return {"low": 0, "medium": 1, "high": 2}[self.value]


class TaskKind(StrEnum):
    """What the call is about; the graph's exits on `task` take the call to the state
    that handles it."""

    BOOK = "book"
    RESCHEDULE = "reschedule"
    CANCEL = "cancel"
    QUERY = "query"
    CONFIRM = "confirm"  # the caller confirms they will come to a booking they have
    HANDOFF = "handoff"


@dataclass(frozen=True)
class RouteDecision:
    route: str
    confidence: Confidence
    evidence: tuple[str, ...]
    task: TaskKind | None = None

    @property
    def label(self) -> str:
        """`route/confidence` in one string (`cancel_request/high`)."""
        return f"{self.route}/{self.confidence}"


NO_ROUTE = RouteDecision("unknown", Confidence.LOW, ("no_rule_matched",))


class RouteRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    route: str
    confidence: Confidence
    task: TaskKind | None = None
    terms: list[str] = Field(default_factory=list)  # each list must match
    absent: list[str] = Field(default_factory=list)  # no list may match
    prompt: str | None = None  # evidence name for `after`
    after: list[str] = Field(default_factory=list)  # the agent's previous action

    @model_validator(mode="after")
    def _has_evidence(self) -> RouteRule:
        if not self.terms and not self.after:
            raise ValueError(f"rule {self.route!r} needs terms or a prompt (`after`)")
        if bool(self.after) != bool(self.prompt):
            raise ValueError(f"rule {self.route!r}: `prompt` names the evidence of `after`")
        return self

    @property
    def evidence(self) -> tuple[str, ...]:
        return ((self.prompt,) if self.prompt else ()) + tuple(self.terms)


class RouterRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    terms: dict[str, list[str]]
    rules: list[RouteRule]

    @model_validator(mode="after")
    def _terms_exist(self) -> RouterRules:
        if FAREWELL_TERMS in self.terms:
            raise ValueError(f"{FAREWELL_TERMS!r} is the farewell rules, not a term list")
        for rule in self.rules:
            missing = [name for name in rule.terms + rule.absent
                       if name not in self.terms and name != FAREWELL_TERMS]
            if missing:
                raise ValueError(f"rule {rule.route!r}: unknown term lists {missing}")
        empty = [name for name, phrases in self.terms.items() if not phrases]
        if empty:
            raise ValueError(f"empty term lists {empty}")
        return self


# The term list of "I can't make it": a cancellation alone, the reason for a move beside one.
CANNOT_COME = "cannot_come_terms"
RED_FLAG_ROUTE = "red_flag"
CRISIS_ROUTE = "crisis"  # a red flag of self-harm: the caller is kept on the line


@dataclass(frozen=True)
class Router:
    rules: tuple[RouteRule, ...]
    patterns: dict[str, re.Pattern[str]]
    red_flags: RedFlagRecognizer

    @classmethod
    def from_rules(cls, rules: RouterRules, red_flags: RedFlagRecognizer) -> Router:
        patterns = {name: phrase_pattern(phrases) for name, phrases in rules.terms.items()}
        return cls(tuple(rules.rules), patterns, red_flags)

    def matches(self, term_list: str, text: str) -> bool:
        if term_list == FAREWELL_TERMS:
            return says_farewell(text)
        return self.patterns[term_list].search(text) is not None

    def route(self, caller_text: str, last_action: str | None = None) -> RouteDecision:
        """A medical red flag, whatever else was said; else the strongest rule that fires
        on this turn (earlier rules win ties)."""
        flag = self.red_flags.first(caller_text)
        if flag is not None:
            route = CRISIS_ROUTE if flag.crisis else RED_FLAG_ROUTE
            return RouteDecision(route, Confidence.HIGH, (f"red_flag:{flag.flag}",),
                                 TaskKind.HANDOFF)
        text = normalize(caller_text)
        best: RouteRule | None = None
        for rule in self.rules:
            if rule.after and last_action not in rule.after:
                continue
            if not all(self.matches(name, text) for name in rule.terms):
                continue
            if any(self.matches(name, text) for name in rule.absent):
                continue
            if best is None or rule.confidence.rank > best.confidence.rank:
                best = rule
        if best is None:
            return NO_ROUTE
        return RouteDecision(best.route, best.confidence, best.evidence, best.task)


@lru_cache(maxsize=64)
def says_farewell(text: str) -> bool:
    """The caller is leaving: a goodbye the quick observer's farewell rules accept."""
    return quick_rules().observe(text).goodbye is not None


def load_router(path: Path = RULES_FILE) -> Router:
    rules = RouterRules.model_validate(yaml.safe_load(path.read_text()))
    return Router.from_rules(rules, default_red_flags())


@lru_cache(maxsize=1)
def default_router() -> Router:
    """The bundled rules, compiled once per process."""
    return load_router()


def route_turn(caller_text: str, last_action: str | None = None) -> RouteDecision:
    return default_router().route(caller_text, last_action)


_CLAUSE_JOIN = re.compile(r"(?:,|;|\.)?\s+\b(?:and then|and also|and|then|also|plus)\b\s+"
                          r"|(?:[.;]|, but)\s+")


def clauses(caller_text: str) -> list[str]:
    """The turn cut where the caller joins one thing to another ("and then", "but")."""
    return [p.strip() for p in _CLAUSE_JOIN.split(caller_text) if p and p.strip()]


def requests_in_order(
    caller_text: str, last_action: str | None = None,
    subject: Callable[[str], object] = lambda _part: None,
) -> list[str]:
    """The turn split where the caller asks for a second thing ("cancel Tuesday's and book
    me Friday instead", "a flu shot and then a blood test" → two requests); one item when
    it asks for one thing. `subject` names what a part is about (the clinic's services):
    two parts with the same task are two requests only when their subjects differ. A part
    that only says they cannot come is no request of its own beside one to move: it is
    why they move it."""
    parts = clauses(caller_text)
    if len(parts) < 2:
        return [caller_text]
    decisions = [route_turn(part, last_action) for part in parts]
    moving = any(d.task is TaskKind.RESCHEDULE for d in decisions)
    requests: list[str] = []
    asked: list[tuple[TaskKind | None, object]] = []
    for part, decision in zip(parts, decisions, strict=True):
        task, about = decision.task, subject(part)
        if moving and decision.evidence == (CANNOT_COME,):
            task = None  # "I can't make that time. Could I move it?": why they move it
        task = task or (TaskKind.BOOK if about is not None else None)
        same = any(t == task and (about is None or a in (None, about)) for t, a in asked)
        if requests and (task is None or task is TaskKind.HANDOFF or same):
            requests[-1] = f"{requests[-1]} and {part}"  # more about the same request
            if asked[-1][1] is None:
                asked[-1] = (asked[-1][0], about)
            continue
        requests.append(part)
        asked.append((task, about))
    return requests if len(requests) > 1 and None not in [t for t, _ in asked] else [caller_text]
