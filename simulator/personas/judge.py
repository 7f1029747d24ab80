"""Did the persona's call do what they wanted? Judged from the call record alone.

The record (GET /api/calls/{id}) says what was written (tool calls), what was said
(turns), what happened (events) and how the call ended. A persona succeeds when:

- each task's outcome is there: the booking, move or cancellation made (of the
  appointment type expected), the question answered, the callback logged, the
  emergency redirect given, the crisis escalated, or nothing written;
- nothing else was written, and for the right patient (a new caller registered under
  their own name and date of birth; an identified caller is the persona);
- every booking write came right after the caller's explicit yes to the agent's
  read-back of it;
- the call ended the way it should (the agent closing it, by default);
- on a call the clinic placed (an outbound persona), who is on the line was checked
  before anything about the patient's care was said, and the task was closed with what
  the callee's goal ended in (outbound_judge.py).

It also counts what the bench reports: caller turns, turns per task, and the agent's
repeated questions as the record counts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from language.phrases import normalize, phrase_pattern
from simulator.personas.model import Outcome, Persona, Task
from simulator.personas.outbound_judge import outbound_problems
from simulator.personas.questions import answers, classify, offers_in

EXPLICIT_YES_FILE = Path(__file__).resolve().parent / "data" / "explicit_yes.yaml"

BOOKING_WRITES = ("CreateAppointment", "RescheduleAppointment", "CancelAppt",
                  "CancelAppointments", "ConfirmAppointment")
HAND_OVER_WRITES = ("EscalateToHuman", "TransferCall")
DO_NOT_CALL_WRITE = "SetDoNotCall"
READ_BACKS = ("confirm_booking", "confirm_cancel")
# On the clinic's own call, the offer of a waitlisted slot and the reminder of an
# appointment are read-backs too: a yes to them books the slot, confirms the visit.
OUTBOUND_READ_BACKS = (*READ_BACKS, "offer_slot", "reminder")
WRITES_FOR: dict[Outcome, tuple[str, ...]] = {
    "booked": ("CreateAppointment",),
    "confirmed": ("ConfirmAppointment",),
    "rescheduled": ("RescheduleAppointment",),
    "cancelled": ("CancelAppt", "CancelAppointments"),
    "cancelled_all": ("CancelAppointments", "CancelAppt"),
    "callback_logged": HAND_OVER_WRITES,
    # The redirect also logs an urgent callback for the team.
    "emergency_redirect": ("EscalateToHuman",),
}
DEFAULT_ENDINGS = ("agent_hangup", "transferred")
CALLER_ENDINGS = ("caller_hangup", "caller_disconnected")


@dataclass
class Verdict:
    """One persona's call, judged."""

    persona: str
    call_id: str | None
    success: bool
    reasons: list[str]
    turns: int  # caller turns
    turns_per_task: float
    repeated_questions: int
    longest_repeat: int  # the most times in a row one question was asked
    unconfirmed_writes: int
    completion_reason: str | None
    writes: list[str] = field(default_factory=list)
    blocked_writes: int = 0  # booking writes the agent tried and a guard refused

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "persona": self.persona, "call_id": self.call_id, "success": self.success,
            "reasons": self.reasons, "turns": self.turns,
            "turns_per_task": round(self.turns_per_task, 2),
            "repeated_questions": self.repeated_questions,
            "longest_repeat": self.longest_repeat,
            "unconfirmed_writes": self.unconfirmed_writes, "blocked_writes": self.blocked_writes,
            "completion_reason": self.completion_reason, "writes": self.writes,
        }


def judge(persona: Persona, record: dict[str, Any] | None, *, problem: str | None = None
          ) -> Verdict:
    """The verdict on one call's record (`problem`: why the record is missing or partial)."""
    if record is None:
        return Verdict(persona.name, None, False, [problem or "no call record"], 0, 0.0, 0, 0, 0,
                       None)
    turns = record.get("turns") or []
    tools = [t for t in record.get("tool_calls") or [] if t.get("succeeded")]
    blocked = [t["name"] for t in record.get("tool_calls") or []
               if t.get("name") in BOOKING_WRITES and t.get("error_class") == "guard"]
    events = record.get("events") or []
    caller_turns = sum(1 for t in turns if t.get("speaker_role") == "caller")
    reasons = [problem] if problem else []
    unconfirmed = unconfirmed_writes(turns, tools, outbound=persona.outbound)
    reasons += unconfirmed
    reasons += [f"the agent tried {name} and a guard refused it {blocked.count(name)} time(s) "
                "(it took something else for a yes, or wrote out of turn)"
                for name in dict.fromkeys(blocked)]
    reasons += outcome_problems(persona, record, tools)
    reasons += patient_problems(persona, tools)
    reasons += ending_problems(persona, record.get("completion_reason"))
    if persona.outbound:
        reasons += outbound_problems(persona, record)
    repeats, longest = repeated_questions(events)
    return Verdict(
        persona=persona.name, call_id=record.get("id"), success=not reasons, reasons=reasons,
        turns=caller_turns, turns_per_task=caller_turns / len(persona.tasks),
        repeated_questions=repeats, longest_repeat=longest,
        unconfirmed_writes=len(unconfirmed), completion_reason=record.get("completion_reason"),
        writes=[t["name"] for t in tools if t["name"] in BOOKING_WRITES + HAND_OVER_WRITES
                + ("CreatePatient", DO_NOT_CALL_WRITE)],
        blocked_writes=len(blocked),
    )


def repeated_questions(events: list[dict[str, Any]]) -> tuple[int, int]:
    """(repeats in the call, the longest run of one question) as the record counts them."""
    repeats = [e.get("data") or {} for e in events if e.get("type") == "question_repeated"]
    ended = next((e.get("data") or {} for e in events if e.get("type") == "call_ended"), {})
    total = ended.get("repeated_questions", len(repeats))
    longest = max((int(r.get("in_a_row", 0)) for r in repeats), default=1 if total == 0 else 2)
    return int(total), longest


class ExplicitYes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    explicit: list[str] = Field(min_length=1)
    not_yes: list[str] = Field(min_length=1)


@lru_cache(maxsize=1)
def _yes_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    phrases = ExplicitYes.model_validate(yaml.safe_load(EXPLICIT_YES_FILE.read_text()))
    return phrase_pattern(phrases.explicit), phrase_pattern(phrases.not_yes)


def explicit_yes(text: str) -> bool:
    """Whether a caller's words are an explicit, unqualified yes."""
    spoken = normalize(text)
    yes, not_yes = _yes_patterns()
    return bool(yes.search(spoken)) and not not_yes.search(spoken)


def unconfirmed_writes(turns: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                       outbound: bool = False) -> list[str]:
    """Each booking write not right after an explicit caller yes to the agent's read-back
    (`outbound`: on the clinic's own call, where an offer or a reminder is one too)."""
    read_backs = OUTBOUND_READ_BACKS if outbound else READ_BACKS
    problems = []
    for tool in (t for t in tools if t["name"] in BOOKING_WRITES):
        caller = _caller_turn_before(turns, tool.get("started_ms"))
        if caller is None:
            problems.append(f"{tool['name']} was written before the caller had said anything")
            continue
        agent = next((t for t in reversed(turns) if t.get("speaker_role") == "agent"
                      and t["seq"] < caller["seq"]), None)
        read_back = agent is not None and classify(
            agent.get("text") or "", outbound=outbound).kind in read_backs
        if not read_back:
            problems.append(f"{tool['name']} was written without a read-back to the caller")
        elif not explicit_yes(caller.get("text") or ""):
            problems.append(f"{tool['name']} was written although the caller did not say yes")
    return problems


def _caller_turn_before(turns: list[dict[str, Any]], at_ms: int | None) -> dict[str, Any] | None:
    """The caller's last turn that started before `at_ms` (call time)."""
    if at_ms is None:
        return None
    started = [t for t in turns if t.get("speaker_role") == "caller"
               and _turn_start(t) is not None and _turn_start(t) <= at_ms]
    return started[-1] if started else None


def _turn_start(turn: dict[str, Any]) -> int | None:
    start = turn.get("user_speech_start_ms")
    return start if start is not None else turn.get("user_speech_end_ms")


def _agent_turns_after_the_caller_spoke(turns: list[dict[str, Any]]) -> list[str]:
    """What the agent said once the caller had spoken: the greeting answers no question
    (a closed clinic's greeting says when it opens before anyone asked)."""
    spoke = next((i for i, t in enumerate(turns) if t.get("speaker_role") == "caller"),
                 len(turns))
    return [t.get("text") or "" for t in turns[spoke:] if t.get("speaker_role") == "agent"]


def outcome_problems(persona: Persona, record: dict[str, Any], tools: list[dict[str, Any]]
                     ) -> list[str]:
    """What each task's expected outcome is missing, and any write no task asked for."""
    problems: list[str] = []
    agent_turns = _agent_turns_after_the_caller_spoke(record.get("turns") or [])
    expected_writes: dict[str, int] = {}
    for task, outcome in zip(persona.tasks, persona.expect.outcome, strict=True):
        problem = _outcome_problem(persona, task, outcome, record, tools, agent_turns)
        if problem:
            problems.append(problem)
        for name in WRITES_FOR.get(outcome, ()):
            expected_writes[name] = expected_writes.get(name, 0) + 1
    written: dict[str, int] = {}
    for tool in tools:
        if tool["name"] in BOOKING_WRITES + HAND_OVER_WRITES:
            written[tool["name"]] = written.get(tool["name"], 0) + 1
    for name, count in written.items():
        allowed = expected_writes.get(name, 0)
        if name == "EscalateToHuman" and any(o in ("crisis_escalation", "callback_logged")
                                             for o in persona.expect.outcome):
            allowed = max(allowed, count)
        if name == "CancelAppt" and "cancelled_all" in persona.expect.outcome:
            allowed = max(allowed, count)
        if count > allowed:
            problems.append(f"unexpected write: {name} x{count - allowed}")
    return problems


def _outcome_problem(persona: Persona, task: Task, outcome: Outcome, record: dict[str, Any],
                     tools: list[dict[str, Any]], agent_turns: list[str]) -> str | None:
    names = [t["name"] for t in tools]
    service = task.type
    if outcome in ("booked", "rescheduled", "cancelled", "cancelled_all", "confirmed"):
        done = [t for t in tools if t["name"] in WRITES_FOR[outcome]]
        if not done:
            return f"expected {outcome}: no {' or '.join(WRITES_FOR[outcome])} succeeded"
        if service and outcome != "cancelled_all" and not any(
                service.lower() in str(t.get("output") or "").lower() for t in done):
            return f"expected {outcome} for a {service}: the write was for something else"
        if outcome in ("booked", "rescheduled"):
            return _when_problem(task, outcome, done, record.get("started_at"))
        return None
    if outcome == "callback_logged":
        return None if any(n in HAND_OVER_WRITES for n in names) else (
            "expected a callback request or a transfer: none was made")
    if outcome == "emergency_redirect":
        return _emergency_problem(task, record)
    if outcome == "crisis_escalation":
        if not any(e.get("type") == "escalation" for e in record.get("events") or []):
            return "expected a safety escalation: none in the record"
        return None
    if outcome in ("nothing_written", "wrong_person"):
        wrote = [n for n in names if n in BOOKING_WRITES + HAND_OVER_WRITES]
        return f"expected nothing written: {', '.join(wrote)}" if wrote else None
    if outcome in ("offer_declined", "slot_gone"):
        return (f"expected {outcome}: the offered slot was booked"
                if "CreateAppointment" in names else None)
    if outcome == "opted_out":
        recorded = DO_NOT_CALL_WRITE in names or any(
            e.get("type") == "do_not_call" for e in record.get("events") or [])
        if recorded:
            return None
        return "expected the callee's \"don't call me again\" recorded: it was not"
    if outcome in ("told_upcoming", "answered"):
        asked = task.kind if task.kind in ("price", "hours") else "upcoming"
        if not any(answers(asked, text) for text in agent_turns):
            return f"expected the {task.kind} question answered: the agent never answered it"
        return None
    return None


def _when_problem(task: Task, outcome: Outcome, done: list[dict[str, Any]],
                  started_at: object) -> str | None:
    """A booking on a day the caller said they cannot do, or further out than they wanted
    (the clinic offers times within two weeks, so "soon" can always be met)."""
    try:
        called = datetime.fromisoformat(str(started_at)).date()
    except ValueError:
        return None
    wanted = task.prefer
    for tool in done:
        for offer in offers_in(str(tool.get("output") or ""))[:1]:
            day = offer.on_or_after(called)
            if wanted.not_day and offer.weekday == wanted.not_day:
                return f"{outcome} on a {offer.weekday.capitalize()}, the day the caller cannot do"
            if wanted.within_days is not None and day is not None and (
                    (day - called).days > wanted.within_days):
                return (f"{outcome} {(day - called).days} days out; the caller wanted it within "
                        f"{wanted.within_days}")
    return None


def _emergency_problem(task: Task, record: dict[str, Any]) -> str | None:
    """The redirect must be the agent's answer to the caller's emergency words."""
    turns = record.get("turns") or []
    words = (task.words or "").lower()[:40]
    said = next((t for t in turns if t.get("speaker_role") == "caller"
                 and words and words in (t.get("text") or "").lower()), None)
    after = [t for t in turns if t.get("speaker_role") == "agent"
             and (said is None or t["seq"] > said["seq"])]
    if not after:
        return "expected an emergency redirect: the agent said nothing after the emergency"
    if said is not None and classify(after[0].get("text") or "").kind != "emergency_advice":
        return "expected an emergency redirect as the answer to the emergency words: the agent " \
               "said something else first"
    if not any(classify(t.get("text") or "").kind == "emergency_advice" for t in after):
        return "expected an emergency redirect: the agent never gave emergency advice"
    return None


def patient_problems(persona: Persona, tools: list[dict[str, Any]]) -> list[str]:
    """Whether the call worked for this persona: registered, or identified, as them."""
    facts = persona.caller
    wrote = any(t["name"] in BOOKING_WRITES for t in tools)
    created = [t for t in tools if t["name"] == "CreatePatient"]
    problems = []
    if facts.new and wrote and not created:
        problems.append("a new caller's booking was written without registering them")
    for tool in created:
        given = tool.get("input") or {}
        if (str(given.get("first_name", "")).lower() != facts.first_name.lower()
                or str(given.get("last_name", "")).lower() != facts.last_name.lower()):
            problems.append("registered under another name than the caller's")
        if _as_date(given.get("date_of_birth")) != facts.date_of_birth:
            problems.append("registered with another date of birth than the caller's")
    for tool in tools:
        output = str(tool.get("output") or "")
        if output.startswith("Identified the caller:") and facts.full_name.lower() not in (
                output.lower()):
            problems.append("identified as another patient than the caller")
    return problems


def _as_date(value: object) -> date | None:
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        return None


def ending_problems(persona: Persona, completion_reason: str | None) -> list[str]:
    """How the call ended, against how it should have."""
    allowed = persona.expect.completion_reason
    if allowed is None:
        if persona.has("hangs_up_early"):
            allowed = list(CALLER_ENDINGS)
        elif "crisis_escalation" in persona.expect.outcome:
            allowed = list(CALLER_ENDINGS) + ["transferred"]
        else:
            allowed = list(DEFAULT_ENDINGS)
    if completion_reason not in allowed:
        return [f"the call ended as {completion_reason}, expected {' or '.join(allowed)}"]
    return []
