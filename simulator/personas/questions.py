"""What the agent just asked, as a simulated caller understands it.

`classify` reads one agent turn into an `AgentAsk`: what kind of answer it wants (a name,
a date of birth, a choice among offered times, a yes to a read-back...), the times it
offered, and the text it read back. The patterns are data
(data/agent_questions.yaml), phrased by meaning so that any agent's wording is
understood, not one engine's lines. Nothing here imports the agent's own
understanding: the caller must not share the code it is testing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from language.phrases import normalize, phrase_pattern

DATA_FILE = Path(__file__).resolve().parent / "data" / "agent_questions.yaml"

AskKind = Literal[
    "crisis_hold", "emergency_advice", "goodbye",
    "keep_move_cancel", "confirm_cancel", "confirm_booking", "confirm_details",
    "which_booking", "choose_slot", "spell_name", "first_name", "last_name", "full_name",
    "date_of_birth", "callback_number", "phone_number", "message", "transfer_offer",
    "callback_offer", "location", "service", "reason", "time_preference", "carry_on",
    "returned_call", "anything_else", "how_can_help", "other",
    # on a call the clinic places (the data file's `outbound` section)
    "opted_out", "slot_gone", "requester", "right_person", "checkin_task", "checkin_memory",
    "checkin_chat", "checkin_greeting", "offer_slot", "reminder", "calling_about",
]
STATEMENTS: tuple[AskKind, ...] = ("crisis_hold", "emergency_advice", "goodbye")
# What the clinic's own call says about what it is for, read on the whole turn.
ABOUT_KINDS: tuple[AskKind, ...] = ("checkin_task", "checkin_memory", "checkin_chat",
                                    "checkin_greeting", "offer_slot", "reminder",
                                    "calling_about")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")
_ABBREVIATION = re.compile(r"\b(Dr|Mr|Mrs|Ms|St)\.")
_TIME = r"\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?)"
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_OFFER = re.compile(
    rf"\b(?P<day>{'|'.join(WEEKDAYS)}|today|tomorrow)\b"
    rf"(?:,? (?:the )?(?P<month>{'|'.join(MONTHS)}) (?P<date>\d{{1,2}})(?:st|nd|rd|th)?)?"
    rf"[^.?!;]*?\b(?P<time>{_TIME})",
    re.IGNORECASE,
)
# A list of the caller's own bookings, not of times on offer.
_OWN_BOOKINGS = re.compile(r"\b(?:you have|you've got|your (?:appointments|bookings))\b")
# The person a right-person question asks for, as written (a name starts with a capital).
_NAME = r"((?:(?:Mr|Mrs|Ms|Miss|Dr)\.? )?[A-Z][a-z'’-]+(?: [A-Z][a-z'’-]+)?)"
_ASKED_FOR = re.compile(
    rf"\b(?:speak|talk)(?:ing)? (?:with|to) {_NAME}"
    rf"|\b[Ii]s (?:this|that) {_NAME}"
    rf"|\b[Ii]s {_NAME} (?:there|available|home|around|in)\b"
    rf"|\b(?:reach|get hold of|contact|get in touch with|looking for) {_NAME}"
    rf"|\b[Aa]re you {_NAME}"
)


class OutboundPatterns(BaseModel):
    """What a call the clinic places says: its purpose ended, who it asks for, what about."""

    model_config = ConfigDict(extra="forbid")

    said: dict[str, list[str]] = Field(min_length=1)
    check: dict[str, list[str]] = Field(min_length=1)
    about: dict[str, list[str]] = Field(min_length=1)


class QuestionPatterns(BaseModel):
    """The data file: statement and question phrase lists, each kind at most once."""

    model_config = ConfigDict(extra="forbid")

    statements: dict[str, list[str]] = Field(min_length=1)
    answers: dict[str, list[str]] = Field(min_length=1)
    questions: dict[str, list[str]] = Field(min_length=1)
    outbound: OutboundPatterns

    def kinds(self) -> list[str]:
        out = self.outbound
        return [*self.statements, *self.questions, *out.said, *out.check, *out.about]


@dataclass(frozen=True)
class Offer:
    """A time the agent offered, as the caller heard it."""

    text: str
    weekday: str  # "monday".."sunday", "today" or "tomorrow"
    hour: int  # 0-23
    month_day: tuple[int, int] | None = None  # (month, day) when the agent said the date

    def on_or_after(self, today: date) -> date | None:
        """The offer's date: the first (month, day) on or after `today`."""
        if self.month_day is None:
            return None
        month, day = self.month_day
        for year in (today.year, today.year + 1):
            try:
                candidate = date(year, month, day)
            except ValueError:
                return None
            if candidate >= today:
                return candidate
        return None

    @property
    def part_of_day(self) -> str:
        return "morning" if self.hour < 12 else "afternoon" if self.hour < 17 else "evening"


@dataclass(frozen=True)
class AgentAsk:
    """One agent turn as the caller understands it."""

    kind: AskKind
    text: str
    question: str | None  # the question left for the caller, as said
    offers: list[Offer] = field(default_factory=list)
    asked_for: str | None = None  # the name a right-person question asks for, if it says one


class PatternError(ValueError):
    """The question patterns file does not follow its model."""


Patterns = list[tuple[AskKind, re.Pattern[str]]]


def _compiled(group: dict[str, list[str]]) -> Patterns:
    return [(kind, phrase_pattern(phrases)) for kind, phrases in group.items()]  # type: ignore[misc]


@lru_cache(maxsize=1)
def _data() -> QuestionPatterns:
    try:
        data = QuestionPatterns.model_validate(yaml.safe_load(DATA_FILE.read_text()))
    except ValidationError as error:
        raise PatternError(f"{DATA_FILE}: {error}") from error
    known = set(AskKind.__args__)  # type: ignore[attr-defined]
    unknown = [kind for kind in data.kinds() if kind not in known]
    if unknown:
        raise PatternError(f"{DATA_FILE}: unknown kinds {unknown}")
    return data


@lru_cache(maxsize=1)
def _patterns() -> tuple[Patterns, Patterns]:
    data = _data()
    return _compiled(data.statements), _compiled(data.questions)


@lru_cache(maxsize=1)
def _outbound_patterns() -> tuple[Patterns, Patterns, Patterns]:
    """(said, check, about); `check` also holds the date-of-birth question."""
    data = _data()
    check = {**data.outbound.check, "date_of_birth": data.questions["date_of_birth"]}
    return (_compiled(data.outbound.said), _compiled(check),
            _compiled(data.outbound.about))


@lru_cache(maxsize=1)
def _answer_patterns() -> dict[str, re.Pattern[str]]:
    return {task: phrase_pattern(phrases) for task, phrases in _data().answers.items()}


def answers(task_kind: str, text: str) -> bool:
    """Whether the agent's words answer (or hand over) a request of this kind that needs
    no write: upcoming bookings, a price, opening hours, a callback, a person."""
    pattern = _answer_patterns().get(task_kind)
    return pattern is not None and bool(pattern.search(normalize(text)))


def sentences(text: str) -> list[str]:
    """The sentences of a turn ('Dr. Patel' does not end one)."""
    protected = _ABBREVIATION.sub(r"\1", text)
    return [s.strip() for s in _SENTENCE.findall(protected) if s.strip()]


def offers_in(text: str) -> list[Offer]:
    """Every weekday-and-time the turn names, in order."""
    found = []
    for match in _OFFER.finditer(text):
        time = match["time"].lower().replace(".", "").replace(" ", "")
        hour = int(re.match(r"\d+", time).group())  # type: ignore[union-attr]
        if time.endswith("pm") and hour != 12:
            hour += 12
        elif time.endswith("am") and hour == 12:
            hour = 0
        month_day = ((MONTHS.index(match["month"].lower()) + 1, int(match["date"]))
                     if match["month"] else None)
        found.append(Offer(match.group(0), match["day"].lower(), hour, month_day))
    return found


def asked_for(question: str) -> str | None:
    """The name a right-person question asks for ("May I speak with Margaret?" →
    'Margaret', "Is Mrs. Chen there?" → 'Mrs. Chen'); None when it names nobody."""
    match = _ASKED_FOR.search(question)
    if match is None:
        return None
    return next(group for group in match.groups() if group).replace("’", "'")


def classify(text: str, *, outbound: bool = False) -> AgentAsk:
    """What one agent turn asks of the caller; `outbound`: on a call the clinic placed,
    where the agent first makes sure who is on the line and says what it calls about."""
    statements, questions = _patterns()
    spoken = normalize(text)
    asked = [s for s in sentences(text) if s.endswith("?")]
    question = asked[-1] if asked else None
    offers = offers_in(text)
    for kind, pattern in statements:
        if kind == "goodbye" and question is not None:
            continue
        if pattern.search(spoken):
            return AgentAsk(kind, text, question, offers)
    if outbound:
        found = _outbound_kind(text, spoken, question)
        if found is not None:
            kind, name = found
            return AgentAsk(kind, text, question, offers, name)
    for scope in ([normalize(question)] if question else []) + [spoken]:
        for kind, pattern in questions:
            if pattern.search(scope):
                if kind == "choose_slot" and _OWN_BOOKINGS.search(spoken):
                    kind = "which_booking"
                return AgentAsk(kind, text, question, offers)
    return AgentAsk("other", text, question, offers)


def _outbound_kind(text: str, spoken: str, question: str | None
                   ) -> tuple[AskKind, str | None] | None:
    """What a turn of the clinic's own call is, before it is read as any call's question."""
    said, check, about = _outbound_patterns()
    for kind, pattern in said:
        if pattern.search(spoken):
            return kind, None
    scope = question or text
    for kind, pattern in check:
        if pattern.search(normalize(scope)):
            named = asked_for(scope) or asked_for(text) if kind == "right_person" else None
            return kind, named
    if question is not None and _asks_anything_else(question):
        return None  # the call's purpose is behind it: "anything else?" is what is asked
    for kind, pattern in about:
        if pattern.search(spoken):
            return kind, None
    return None


def _asks_anything_else(question: str) -> bool:
    _, questions = _patterns()
    pattern = next(p for kind, p in questions if kind == "anything_else")
    return bool(pattern.search(normalize(question)))
