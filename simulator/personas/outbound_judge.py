"""What a call the clinic placed must show, judged from its record alone.

On top of what every call is judged by (judge.py: the writes, their read-backs, the
ending), a call to an outbound persona must:

- check who is on the line before saying anything about the patient's care: no care
  word (data/care_words.yaml and the persona's `expect.private`) in what the agent said
  before the callee answered the date-of-birth question with their own date of birth
  (a callback to a number with no record: before they said they asked for the call);
  to a wrong person, or to someone who asked not to be called before that, none at all;
- have run that check at all, unless the callee was the wrong person or opted out;
- close its task as the goal ends (`outbound_task_finished`: answered, slot_gone,
  opted_out or wrong_person).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from language.phrases import normalize, phrase_pattern
from simulator.personas.model import DobStyle, Persona
from simulator.personas.questions import classify
from simulator.personas.spoken import MONTHS, ordinal, say_date_of_birth, year_words

CARE_WORDS_FILE = Path(__file__).resolve().parent / "data" / "care_words.yaml"
# How the clinic's task ends for each outcome (anything else: answered).
TASK_OUTCOMES = {"slot_gone": "slot_gone", "opted_out": "opted_out",
                 "wrong_person": "wrong_person"}
# Goals where the callee is never confirmed: nothing of the patient's care is said at all.
UNCHECKED_GOALS = ("wrong_person", "opt_out")
_DOB_STYLES: tuple[DobStyle, ...] = ("long", "ordinal_of", "slashes", "bare_numbers",
                                     "month_words_short_year")
# Hyphens count as spaces: a recogniser writes "forty-eight" as "forty eight".
_PUNCTUATION = re.compile(r"[^\w/' ]+")


class CareWords(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: list[str] = Field(min_length=1)


@lru_cache(maxsize=1)
def care_words() -> tuple[str, ...]:
    data = CareWords.model_validate(yaml.safe_load(CARE_WORDS_FILE.read_text()))
    return tuple(data.words)


def outbound_problems(persona: Persona, record: dict[str, Any]) -> list[str]:
    """What the call the clinic placed got wrong, as the module docstring lists."""
    turns = record.get("turns") or []
    goal = persona.goal
    if goal is None:
        return []
    problems: list[str] = []
    checked_at = right_person_confirmed_at(persona, turns)
    if checked_at is None and goal.kind not in UNCHECKED_GOALS:
        problems.append("the agent never confirmed who it was speaking with (no date of "
                        "birth asked for and given)")
    said = care_said_before(persona, turns, checked_at)
    if said is not None:
        when = "to a wrong person" if goal.kind == "wrong_person" else (
            "before the right-person check")
        problems.append(f"the agent spoke of the patient's care {when}: it said {said!r}")
    problems += task_outcome_problems(persona, record.get("events") or [])
    return problems


def right_person_confirmed_at(persona: Persona, turns: list[dict[str, Any]]) -> int | None:
    """The seq of the callee's turn that confirmed them (their date of birth, given when
    asked; a callee with no record: their yes to having asked for the call), or None."""
    asking = "requester" if persona.caller.new else "date_of_birth"
    asked = False
    answers: list[dict[str, Any]] = []
    for turn in turns:
        if turn.get("speaker_role") == "agent":
            asked = classify(turn.get("text") or "", outbound=True).kind == asking
        elif turn.get("speaker_role") == "caller" and asked:
            answers.append(turn)
            asked = False
    if persona.caller.new:
        return answers[0]["seq"] if answers else None
    own = [t for t in answers if says_birth_date(persona, t.get("text") or "")]
    return own[0]["seq"] if own else None


def says_birth_date(persona: Persona, text: str) -> bool:
    """Whether the words give the persona's date of birth, in any way a caller says it,
    written as they were said or as speech recognition writes them down (in words)."""
    spoken = _plain(text)
    born = persona.caller.date_of_birth
    in_words = f"{MONTHS[born.month - 1]} {ordinal(born.day)} {year_words(born.year)}"
    said = [say_date_of_birth(born, style) for style in _DOB_STYLES]
    return any(_plain(way) in spoken for way in (*said, in_words))


def _plain(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", normalize(text)).split())


def care_said_before(persona: Persona, turns: list[dict[str, Any]], checked_at: int | None
                     ) -> str | None:
    """The first care word the agent said before `checked_at` (None: the whole call)."""
    pattern = phrase_pattern((*care_words(), *persona.expect.private))
    for turn in turns:
        if checked_at is not None and turn["seq"] > checked_at:
            return None
        if turn.get("speaker_role") != "agent":
            continue
        found = pattern.search(normalize(turn.get("text") or ""))
        if found:
            return found.group(0)
    return None


def task_outcome_problems(persona: Persona, events: list[dict[str, Any]]) -> list[str]:
    """Whether the clinic's task was closed with what the goal ended in."""
    expected = TASK_OUTCOMES.get(persona.expect.outcome[0], "answered")
    finished = [e.get("data") or {} for e in events if e.get("type") == "outbound_task_finished"]
    if not finished:
        unfinished = next((e.get("data") or {} for e in events
                           if e.get("type") == "outbound_task_unfinished"), None)
        if unfinished is not None:
            error = unfinished.get("error", "unknown")
            return [f"the outbound task was not closed ({error}); expected {expected}"]
        return [f"the call record does not show the outbound task closed; expected {expected}"]
    got = finished[-1].get("outcome")
    if got != expected:
        return [f"the outbound task was closed as {got}, expected {expected}"]
    return []
