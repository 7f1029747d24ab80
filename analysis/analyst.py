"""Who analyses a finished call: the rules, or the fast model with the rules beneath it.

The rules always run first (microseconds): what was done comes from the record, so it is
the rules' in every analysis. The model adds what words need reading: what the caller
wanted and what is left, concerns, the five scores, and the words it thinks the
recognizer misheard. A model that times out or answers junk leaves the rules' analysis,
marked with why (`fallback`); its turn numbers are kept only when the call has them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field

from analysis.quality import QualityScore, Score, score_call
from analysis.summary import CallSummary, Item, summarise
from analysis.turn_links import numbered_transcript
from db.call_analyses import DIMENSIONS, CallRecord
from db.stt_suggestions import Misheard
from lib.model_answers import parse_answer
from lib.prompts import render_prompt

MAX_ITEMS = 10
TEXT_CHARS = 300

StructuredAsk = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class Analysis:
    analyst: str  # "rules", or "model:<provider>"
    summary: CallSummary
    quality: QualityScore
    fallback: str | None = None  # why the model's analysis is not the one kept
    misheard: tuple[Misheard, ...] = field(default=())


class Analyst(Protocol):
    name: str

    async def analyse(self, record: CallRecord) -> Analysis: ...


class RulesAnalyst:
    name = "rules"

    async def analyse(self, record: CallRecord) -> Analysis:
        summary = summarise(record)
        return Analysis("rules", summary, score_call(record, summary))


# --- The model's answer ----------------------------------------------------------------


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=1, max_length=TEXT_CHARS)
    turns: list[int] = Field(default_factory=list, max_length=20)


class _Concern(_Line):
    kind: Literal["health", "safety", "dissatisfaction"]


class _Score(BaseModel):
    model_config = ConfigDict(extra="ignore")
    score: int = Field(ge=1, le=5)
    reason: str = Field(min_length=1, max_length=TEXT_CHARS)
    turns: list[int] = Field(default_factory=list, max_length=20)


class _Quality(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_completion: _Score
    information_accuracy: _Score
    conversation_flow: _Score
    error_recovery: _Score
    caller_experience: _Score


class _Misheard(BaseModel):
    model_config = ConfigDict(extra="ignore")
    said: str = Field(min_length=2, max_length=60)
    heard: str = Field(default="", max_length=120)
    turn: int | None = None


class ModelAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    wanted: list[_Line] = Field(default_factory=list, max_length=MAX_ITEMS)
    left_for_person: list[_Line] = Field(default_factory=list, max_length=MAX_ITEMS)
    concerns: list[_Concern] = Field(default_factory=list, max_length=MAX_ITEMS)
    quality: _Quality
    stt_suggestions: list[_Misheard] = Field(default_factory=list, max_length=MAX_ITEMS)


def _line_schema(**extra: dict) -> dict:
    return {"type": "object", "required": ["text", "turns"], "properties": {
        "text": {"type": "string"}, "turns": {"type": "array", "items": {"type": "integer"}},
        **extra}}


def answer_schema() -> dict:
    """The JSON the model is held to where its provider can."""
    score = {"type": "object", "required": ["score", "reason", "turns"], "properties": {
        "score": {"type": "integer"}, "reason": {"type": "string"},
        "turns": {"type": "array", "items": {"type": "integer"}}}}
    return {"type": "object", "required": ["wanted", "left_for_person", "concerns", "quality",
                                           "stt_suggestions"], "properties": {
        "wanted": {"type": "array", "items": _line_schema()},
        "left_for_person": {"type": "array", "items": _line_schema()},
        "concerns": {"type": "array", "items": _line_schema(kind={
            "type": "string", "enum": ["health", "safety", "dissatisfaction"]})},
        "quality": {"type": "object", "required": list(DIMENSIONS),
                    "properties": {name: score for name in DIMENSIONS}},
        "stt_suggestions": {"type": "array", "items": {
            "type": "object", "required": ["said", "heard"], "properties": {
                "said": {"type": "string"}, "heard": {"type": "string"},
                "turn": {"type": "integer"}}}},
    }}


def fact_lines(record: CallRecord, rules: Analysis) -> str:
    facts = [f"- {item.text} (turns {list(item.turns)})" for item in rules.summary.done]
    facts += [f"- Left for a person: {item.text}" for item in rules.summary.left_for_person]
    facts += [f"- {name}: {score.score}/5 by the rules ({score.reason})"
              for name, score in rules.quality.dimensions.items()]
    if record.transcript_accuracy is not None:
        facts.append(f"- Speech recognition accuracy against a re-transcription: "
                     f"{record.transcript_accuracy:.0%}")
    return "\n".join(facts) or "- Nothing was recorded."


class ModelAnalyst:
    """The fast model, with the rules beneath it."""

    def __init__(self, ask: StructuredAsk, *, provider: str, timeout_s: float) -> None:
        self._ask, self._timeout_s = ask, timeout_s
        self.name = f"model:{provider}"
        self._rules = RulesAnalyst()

    async def analyse(self, record: CallRecord) -> Analysis:
        rules = await self._rules.analyse(record)
        if not record.caller_turns():
            return rules  # nothing the caller said: nothing for a model to read
        prompt = render_prompt("analysis/call.md", transcript=numbered_transcript(record),
                               facts=fact_lines(record, rules))
        try:
            raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
            answer = parse_answer(raw, ModelAnswer, "analysis answer does not fit")
        except Exception as error:  # noqa: BLE001 - the rules' analysis stands, marked
            reason = ("timed out" if isinstance(error, TimeoutError)
                      else str(error) if isinstance(error, ValueError) else type(error).__name__)
            logger.warning(f"call {record.call_id}: model analysis failed "
                           f"({type(error).__name__}); the rules' analysis stands")
            return Analysis("rules", rules.summary, rules.quality, fallback=reason[:200])
        return merged(record, rules, answer, self.name)


def _turn_start(record: CallRecord, seq: int | None) -> int | None:
    """Where in the recording a turn starts (None: no such turn, or no timings)."""
    turn = record.turn(seq) if seq is not None else None
    return turn.speech_start_ms if turn is not None else None


def merged(record: CallRecord, rules: Analysis, answer: ModelAnswer, analyst: str) -> Analysis:
    """The rules' facts with the model's reading of the words."""
    seqs = {t.seq for t in record.turns}

    def turns(numbers: list[int]) -> tuple[int, ...]:
        return tuple(sorted({n for n in numbers if n in seqs}))

    summary = rules.summary
    left = list(summary.left_for_person) + [
        Item(line.text, turns(line.turns)) for line in answer.left_for_person
        if line.text not in {i.text for i in summary.left_for_person}]
    concerns = list(summary.concerns) + [
        Item(c.text, turns(c.turns), kind=c.kind) for c in answer.concerns]
    wanted = summary.wanted or tuple(Item(line.text, turns(line.turns))
                                     for line in answer.wanted)
    quality = QualityScore({name: Score(s.score, s.reason, turns(s.turns))
                            for name, s in answer.quality.model_dump().items()
                            for s in [_Score.model_validate(s)]})
    misheard = tuple(Misheard(m.said.strip(), m.heard.strip(), _turn_start(record, m.turn),
                              "model") for m in answer.stt_suggestions)
    return Analysis(analyst, CallSummary(wanted, summary.done, tuple(left)[:MAX_ITEMS * 2],
                                         tuple(concerns)[:MAX_ITEMS * 2], summary.unresolved),
                    quality, misheard=misheard)

