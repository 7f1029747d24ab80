"""A finished call's quality on five dimensions (1-5), by transparent rules.

Each dimension starts at 5 and loses points for what the record shows: repeated
questions, dead air and barge-ins cost conversation flow; failed tools and a misheard
transcript cost information accuracy; a request left undone costs task completion (one
handed to a person, by a call back, a transfer or a safety escalation, less); how the
call came back from its errors is error recovery; dissatisfaction, an escalation still
waiting for a person and a bad ending cost the caller's experience. Every lost point
carries its reason and its turns, so a reviewer can jump to the moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from analysis.summary import WRITING_TASKS, CallSummary, restated
from analysis.summary_rules import restating_pattern
from analysis.turn_links import linked, turn_at
from db.call_analyses import CallRecord, RecordedEvent

RULES_FILE = Path(__file__).resolve().parent / "data" / "quality_rules.yaml"


class Accuracy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    doubtful: float = Field(gt=0, le=1)
    bad: float = Field(gt=0, le=1)


class QualityRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dead_air_ms: int = Field(gt=0)
    accuracy: Accuracy
    errors: dict[str, str]
    not_errors: dict[str, dict[str, Any]] = Field(default_factory=dict)
    bad_endings: dict[str, str]
    bad_completions: dict[str, str] = Field(default_factory=dict)

    def is_error(self, event: RecordedEvent) -> bool:
        excuse = self.not_errors.get(event.type)
        return event.type in self.errors and not (
            excuse and all(event.data.get(k) == v for k, v in excuse.items()))


@lru_cache(maxsize=1)
def quality_rules(path: Path = RULES_FILE) -> QualityRules:
    return QualityRules.model_validate(yaml.safe_load(path.read_text()))


@dataclass(frozen=True)
class Score:
    score: int
    reason: str
    turns: tuple[int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"score": self.score, "reason": self.reason, "turns": list(self.turns)}


@dataclass
class _Tally:
    """A dimension being scored: points lost, each with why and where."""

    lost: int = 0
    reasons: list[str] = field(default_factory=list)
    turns: set[int] = field(default_factory=set)

    def lose(self, points: int, reason: str, turns: tuple[int, ...] = ()) -> None:
        self.lost += points
        self.reasons.append(reason)
        self.turns.update(turns)

    def score(self, clean: str) -> Score:
        if not self.reasons:
            return Score(5, clean)
        reason = "; ".join(self.reasons)
        return Score(max(1, 5 - self.lost), reason[:1].upper() + reason[1:] + ".",
                     tuple(sorted(self.turns)))


@dataclass(frozen=True)
class QualityScore:
    dimensions: dict[str, Score]

    @property
    def overall(self) -> float:
        return round(sum(s.score for s in self.dimensions.values()) / len(self.dimensions), 2)

    def as_json(self) -> dict[str, Any]:
        return {name: score.as_json() for name, score in self.dimensions.items()}


Moments = tuple[int | None, ...]  # one entry per occurrence: its turn, if known


@dataclass(frozen=True)
class Signals:
    """What went wrong or right, read once from the record."""

    repeated: Moments
    restated: Moments  # the caller had to say again what they wanted
    dead_air: Moments
    barge_ins: Moments
    failed_tools: tuple[tuple[str, str, int | None], ...]  # name, error class, turn
    errors: tuple[tuple[str, int | None], ...]  # what went wrong, turn
    bad_ending: tuple[str, int | None] | None


def _restated(record: CallRecord) -> Moments:
    """Each turn where the caller had to say again what they wanted: the graph went back
    to find out, or their own words say so ("like I said")."""
    turns = {turn_at(record, hop.at_ms) for hop in restated(record)}
    said = {t.seq for t in record.caller_turns()
            if restating_pattern().search(t.text.lower().replace("’", "'"))}
    return tuple(sorted({t for t in turns if t is not None} | said)) or tuple(
        t for t in turns if t is None)


def _moments(record: CallRecord, *types: str) -> Moments:
    return tuple(turn_at(record, e.at_ms) for e in record.events_of(*types))


def read_signals(record: CallRecord) -> Signals:
    rules = quality_rules()
    gaps = tuple(
        after.seq for before, after in zip(record.turns, record.turns[1:], strict=False)
        if before.role == "caller" and after.role == "agent"
        and before.speech_end_ms is not None and after.speech_start_ms is not None
        and after.speech_start_ms - before.speech_end_ms > rules.dead_air_ms)
    interrupted = tuple(t.seq for t in record.turns if t.role == "agent" and t.interrupted)
    barged = _moments(record, "barge_in")
    return Signals(
        repeated=_moments(record, "question_repeated"),
        restated=_restated(record),
        dead_air=gaps + _moments(record, "silence_checkin", "silent_reply"),
        barge_ins=barged if len(barged) >= len(interrupted) else interrupted,
        failed_tools=tuple((t.name, t.error_class or "failed", turn_at(record, t.started_ms))
                           for t in record.tools if t.succeeded is False or t.error_class),
        errors=tuple((rules.errors[e.type], turn_at(record, e.at_ms)) for e in record.events
                     if rules.is_error(e)),
        bad_ending=next(((rules.bad_endings[e.type], turn_at(record, e.at_ms))
                         for e in record.events if e.type in rules.bad_endings),
                        (rules.bad_completions[record.completion_reason], None)
                        if record.completion_reason in rules.bad_completions else None),
    )


def _count(what: Moments) -> tuple[int, tuple[int, ...]]:
    """How many, and the turns they are known at."""
    return len(what), linked(*what)


def task_completion(record: CallRecord, summary: CallSummary) -> Score:
    if not record.caller_turns():
        return Score(3, "The caller said nothing the agent could act on.")
    done, unresolved = summary.done, summary.unresolved
    if unresolved:
        names = ", ".join(item.text.lower() for item in unresolved)
        turns = linked(*(s for item in unresolved for s in item.turns))
        if not done:
            return Score(1 if len(unresolved) == len(summary.wanted) else 2,
                         f"Not done: {names}; nothing else was either.", turns)
        return Score(2, f"Not done: {names}.", turns)
    handed = [i for i in done if i.task == "person"]
    writing = [w for w in summary.wanted if w.task in WRITING_TASKS]
    if handed and writing and not any(i.task in WRITING_TASKS for i in done):
        return Score(4, f"Handed on to a person: {handed[0].text.lower()}.", handed[0].turns)
    if done:
        return Score(5, "Done: " + "; ".join(item.text.rstrip(".") for item in done) + ".",
                     linked(*(s for item in done for s in item.turns)))
    if summary.wanted:
        return Score(5, "Answered: " + ", ".join(w.text.lower() for w in summary.wanted) + ".",
                     linked(*(s for w in summary.wanted for s in w.turns)))
    return Score(3, "What the caller wanted was not recognised.")


def information_accuracy(record: CallRecord, signals: Signals) -> Score:
    rules, tally = quality_rules(), _Tally()
    failed = [t for t in signals.failed_tools if t[1] != "guard"]
    if failed:
        tally.lose(min(2, len(failed)), "failed: " + ", ".join(f"{n} ({c})" for n, c, _ in failed),
                   linked(*(t for _, _, t in failed)))
    refused = [t for t in signals.failed_tools if t[1] == "guard"]
    if refused:
        tally.lose(1, "refused by a guard: " + ", ".join(n for n, _, _ in refused),
                   linked(*(t for _, _, t in refused)))
    unsure = [(what, turn) for what, turn in signals.errors
              if what in (rules.errors.get("write_unconfirmed"),
                          rules.errors.get("clinical_event_failed"))]
    if unsure:
        tally.lose(1, unsure[0][0], linked(*(t for _, t in unsure)))
    accuracy = record.transcript_accuracy
    if accuracy is not None and accuracy < rules.accuracy.doubtful:
        tally.lose(2 if accuracy < rules.accuracy.bad else 1,
                   f"the caller's words were {round(100 * accuracy)}% recognised")
    return tally.score("Nothing the agent relied on failed or was misheard.")


def conversation_flow(signals: Signals) -> Score:
    tally = _Tally()
    count, turns = _count(signals.repeated)
    if count:
        tally.lose(min(2, count), f"a question asked again {count} time{'s' * (count > 1)}",
                   turns)
    count, turns = _count(signals.restated)
    if count:
        tally.lose(1, "the caller had to say again what they wanted", turns)
    count, turns = _count(signals.dead_air)
    if count:
        tally.lose(1 if count < 3 else 2, f"{count} stretch{'es' * (count > 1)} of dead air",
                   turns)
    count, turns = _count(signals.barge_ins)
    if count >= 2:
        tally.lose(1 if count < 4 else 2, f"the caller talked over the agent {count} times",
                   turns)
    return tally.score("No repeated questions, misread requests, dead air or talking over.")


def error_recovery(record: CallRecord, summary: CallSummary, signals: Signals) -> Score:
    problems = [(f"{n} failed", t) for n, _, t in signals.failed_tools] + list(signals.errors)
    if not problems:
        return Score(5, "Nothing went wrong that needed recovering from.")
    what = "; ".join(dict.fromkeys(p for p, _ in problems))
    turns = linked(*(t for _, t in problems))
    if signals.bad_ending is not None:
        return Score(1 if "audio path" in signals.bad_ending[0] else 2,
                     f"After {what}, {signals.bad_ending[0]}.", turns)
    if not summary.unresolved:
        return Score(4, f"Recovered after {what}.", turns)
    if any(item.task == "person" for item in summary.done):
        return Score(3, f"After {what}, the caller was handed on to a person.", turns)
    return Score(2, f"After {what}, the caller's request was left undone.", turns)


def caller_experience(record: CallRecord, summary: CallSummary, signals: Signals) -> Score:
    tally = _Tally()
    unhappy = [c for c in summary.concerns if c.kind == "dissatisfaction"]
    if unhappy:
        tally.lose(min(2, len(unhappy)), "the caller was unhappy",
                   linked(*(s for c in unhappy for s in c.turns)))
    waiting = [e for e in record.escalations if e.get("status") == "open"]
    if waiting:
        tally.lose(1, "an escalation still waits for a person",
                   linked(*(turn_at(record, e.get("at_ms")) for e in waiting)))
    if signals.bad_ending is not None:
        tally.lose(1, signals.bad_ending[0], linked(signals.bad_ending[1]))
    elif record.completion_reason == "caller_hangup" and summary.unresolved:
        tally.lose(1, "the caller hung up with their request undone")
    return tally.score("The call ended with the caller's requests handled and no sign of "
                       "dissatisfaction.")


def score_call(record: CallRecord, summary: CallSummary) -> QualityScore:
    signals = read_signals(record)
    return QualityScore({
        "task_completion": task_completion(record, summary),
        "information_accuracy": information_accuracy(record, signals),
        "conversation_flow": conversation_flow(signals),
        "error_recovery": error_recovery(record, summary, signals),
        "caller_experience": caller_experience(record, summary, signals),
    })
