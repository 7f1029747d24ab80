"""The LLM navigator: a fast model picks the action or exit, validated, retried, never stuck.

Same contract as the deterministic navigator (a `NavDecision`), so the engine runs
either. Per state the model gets the state's task, its actions and exits (with their
descriptions) and the caller's words, and answers JSON (`NavChoice`). An answer that is
not valid JSON, not the schema, or names an option the state does not have is retried,
up to `ATTEMPTS` in all; then the first valid action (or, in a state with none, the first
exit) is taken and `navigator_fallback` recorded. The first filler phrase any attempt
produced is kept (the first wins), so the caller hears it even during recovery.
What the words settle (slot picked, yes to the read-back, names, dates) is understood by
the same deterministic code as the other backend: the model decides where to go, never
what the caller confirmed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date

from pydantic import BaseModel, field_validator

from call.call_session import CallLog
from flows.graph import ContextGraph, StateType
from flows.graph_session import GraphSession
from flows.navigator import (
    MAX_HOPS,
    FillerSink,
    Hop,
    NavDecision,
    NavigationError,
    Turn,
    may_enter,
    read_turn,
    take_exit,
    took_action,
    understand,
)
from lib.model_answers import parse_answer
from lib.prompts import render_prompt

ATTEMPTS = 3
DECISION_TIMEOUT_S = 2.0
DEFAULT_FILLER_GUIDANCE = "2-4 words, plain and friendly, hinting at what the agent does next"

# The model call: prompt in, raw text out (Gemini Flash or Claude Haiku in production).
DecisionModel = Callable[[str], Awaitable[str]]


class NavChoice(BaseModel):
    choice: str
    filler: str | None = None
    verify_audio: bool = False

    @field_validator("filler")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


# What the provider is asked to enforce (strict form: all required, nothing extra).
NAV_CHOICE_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "choice": {"type": "string"},
        "filler": {"type": "string"},
        "verify_audio": {"type": "boolean"},
    },
    "required": ["choice", "filler", "verify_audio"],
    "additionalProperties": False,
}


@dataclass
class Choice:
    name: str
    filler: str | None
    verify_audio: bool
    attempts: int
    fell_back: bool


@dataclass
class Filler:
    """The turn's filler phrase: the first one any answer gives, said at once if it can be."""

    sink: FillerSink | None
    text: str | None = None
    said: bool = False

    async def offer(self, text: str | None) -> None:
        if not text or self.text is not None:
            return
        self.text = text
        if self.sink is not None:
            await self.sink(text)  # the caller hears it while the decision goes on
            self.said = True


def parse_choice(raw: str) -> NavChoice:
    """The model's answer as a NavChoice (code fences tolerated); ValueError otherwise."""
    return parse_answer(raw, NavChoice, "not a navigator choice")


class LLMNavigator:
    def __init__(
        self, graph: ContextGraph, model: DecisionModel, log: CallLog, *, clinic_name: str,
        attempts: int = ATTEMPTS, timeout_s: float = DECISION_TIMEOUT_S,
        filler_guidance: Callable[[], str] = lambda: DEFAULT_FILLER_GUIDANCE,
    ) -> None:
        """`filler_guidance`: how this turn's filler should sound (the caller's register:
        processors/emotion/fillers.filler_guidance), asked afresh each turn."""
        self.graph, self.model, self.log = graph, model, log
        self.filler_guidance = filler_guidance
        self.clinic_name = clinic_name
        self.attempts, self.timeout_s = attempts, timeout_s

    async def navigate(
        self, session: GraphSession, state: str, text: str, today: date, *,
        filler: FillerSink | None = None,
    ) -> NavDecision:
        turn = read_turn(session, text)
        understand(session, turn, today)
        return await self._walk(session, state, turn, Filler(filler))

    async def resume(self, session: GraphSession, state: str, turn: Turn) -> NavDecision:
        return await self._walk(session, state, turn, Filler(None), tool_done=True)

    async def _walk(
        self, session: GraphSession, state: str, turn: Turn, filler: Filler, *,
        tool_done: bool = False,
    ) -> NavDecision:
        start = state
        hops: list[Hop] = []
        verify = False
        for _ in range(MAX_HOPS):
            spec = self.graph.states[state]
            if spec.type is StateType.TOOL_CALL and not (tool_done and state == start):
                return NavDecision(state=state, action="", route=turn.route, hops=hops,
                                   filler=filler.text, filler_said=filler.said,
                                   pending_tool=spec.tool, turn=turn)
            if spec.type in (StateType.ANNOTATION, StateType.RECALL):
                # nothing to decide: they pass straight on (where the call may go)
                exit_ = next((e for e in spec.exits if may_enter(self.graph, session, state, e.to)),
                             None)
                if exit_ is None:
                    raise NavigationError(f"state {state!r}: no way on may be entered")
            else:
                choice = await self.choose(session, state, turn, filler)
                verify = verify or choice.verify_audio
                exit_ = next((e for e in self.graph.exits_of(state) if e.name == choice.name), None)
                if exit_ is None:
                    took_action(session, choice.name)
                    return NavDecision(
                        state=state, action=choice.name, route=turn.route, hops=hops,
                        filler=filler.text or self.graph.actions[choice.name].filler,
                        filler_said=filler.said, verify_audio=verify,
                        terminal=spec.is_terminal, turn=turn,
                    )
            target = take_exit(self.graph, session, state, exit_.to)
            hops.append(Hop(state, target, exit_.name))
            state = target
        raise NavigationError(f"no action within {MAX_HOPS} hops (stopped in {state!r})")

    async def choose(
        self, session: GraphSession, state: str, turn: Turn, filler: Filler | None = None
    ) -> Choice:
        """Ask the model, validate, retry; the first valid option if every attempt fails."""
        spec = self.graph.states[state]
        # an exit into a state whose required guards refuse is no option (the model reads
        # descriptions, not conditions: this is what keeps it out)
        exits = [e.name for e in self.graph.exits_of(state)
                 if may_enter(self.graph, session, state, e.to)]
        valid = [*spec.actions, *exits] if spec.type is StateType.ACTION else exits
        if not valid:
            raise NavigationError(f"state {state!r}: no way on may be entered")
        prompt = self._prompt(session, state, turn, valid)
        filler = filler or Filler(None)
        for attempt in range(1, self.attempts + 1):
            try:
                answer = parse_choice(await asyncio.wait_for(self.model(prompt), self.timeout_s))
            except Exception as error:  # noqa: BLE001 - junk, a timeout or a model failure: retry
                self.log.event("navigator_retry", state=state, attempt=attempt,
                               error=type(error).__name__)
                continue
            await filler.offer(answer.filler)  # first wins, even from an invalid answer
            if answer.choice in valid:
                return Choice(answer.choice, filler.text, answer.verify_audio, attempt, False)
            self.log.event("navigator_retry", state=state, attempt=attempt,
                           error=f"unknown option {answer.choice[:40]!r}")
        fallback = valid[0]
        self.log.event("navigator_fallback", state=state, choice=fallback)
        return Choice(fallback, filler.text, False, self.attempts, True)

    def _prompt(self, session: GraphSession, state: str, turn: Turn, valid: list[str]) -> str:
        spec = self.graph.states[state]
        exits = {e.name: e for e in self.graph.exits_of(state) if e.name in valid}
        options = "\n".join(
            f"- {name} (exit to {exits[name].to}): {exits[name].description}" if name in exits
            else f"- {name} (action): {self.graph.actions[name].description}"
            for name in valid
        )
        return render_prompt(
            "navigator/choose.md", clinic_name=self.clinic_name, state=state,
            state_description=spec.description, phases=", ".join(spec.phases) or "-",
            caller_text=turn.text.replace('"', "'"), facts=json.dumps(session.facts()), options=options,
            filler_guidance=self.filler_guidance(),
        )
