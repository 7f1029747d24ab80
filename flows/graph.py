"""Context graphs as versioned data: a hierarchical state machine read from YAML.

A graph is what the agent may do on a call: states of six types, super-states whose
tool sets their children inherit and narrow, phases, a catalogue of deterministic
actions, exit conditions, and per-state tools with guards. `load_graph` validates
everything a call would otherwise trip over mid-conversation (unknown references,
unreachable states, no terminal state, a child widening its parent's tools) and names
the offending state in the error.

`time_limit` says what happens when a call reaches the director's time limit: `escalate`
(a person from the team is asked to take over; the default, so a call is never simply
cut off), `offer_callback` (the caller chooses a call back or carrying on) or `end`
(a short closing line and the end).

Tool lists are written as entries: a tool name, a named tool set, or `-Name` to remove
a tool (`[BASE_TOOLS, -CreatePatient]`). A state without `tools` inherits its
super-state's set; a state with `tools` may only narrow it.

A state (or super-state, for all its children) may `require` guards: no navigator
enters it while one of them refuses (flows/guards.py), whatever the words or the model
say. A graph may be built from others (`include`, `omit`, `guard_all`:
flows/graph_compose.py).
"""

from __future__ import annotations

import re
from collections import deque
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from flows.graph_compose import CompositionError, compose
from processors.conversation.time_limit import DEFAULT_TIME_LIMIT, TimeLimitPolicy

GRAPHS_DIR = Path(__file__).parent / "graphs"

# An exit to this target goes back to the state the side-loop was entered from.
RETURN = "@return"



class StateType(StrEnum):
    ACTION = "action"  # the engage LLM speaks one of the state's actions
    DECISION = "decision"  # the navigator picks an exit, nobody speaks
    REFLECTION = "reflection"  # deep reasoning, optional tools, then an exit
    TOOL_CALL = "tool_call"  # the designated tool runs, then an exit
    RECALL = "recall"  # memory lookup, then an exit
    ANNOTATION = "annotation"  # an inner thought is injected, then the one exit


# States the navigator passes through on its own, without waiting for the caller.
PASS_THROUGH = frozenset(
    {StateType.DECISION, StateType.TOOL_CALL, StateType.RECALL, StateType.ANNOTATION}
)


class GraphError(ValueError):
    """A graph that cannot run; the message names the file and the offending state."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolSpec(_Strict):
    """A tool the graph may allow, what it takes (JSON Schema properties for the LLM), and
    what must hold before it runs."""

    description: str
    kind: Literal["read", "write", "handoff"]
    guards: list[str] = Field(default_factory=list)
    parameters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    # A write offered to a caller who is not identified yet (creating their record);
    # every other write is hidden until the call knows who is calling.
    unidentified: bool = False
    # The intent gate: the model must quote what the caller said (`user_quote`), or the
    # call is refused.
    intent_gate: bool = False

    @model_validator(mode="after")
    def _required_are_parameters(self) -> ToolSpec:
        missing = sorted(set(self.required) - set(self.parameters))
        if missing:
            raise ValueError(f"required parameters {missing} are not defined")
        if self.intent_gate and "user_quote" not in self.required:
            raise ValueError("an intent-gated tool must require a user_quote parameter")
        return self


class ActionSpec(_Strict):
    """A deterministic action: what the agent is told to do, and how it says it offline."""

    description: str
    say: str | None = None  # spoken template for local engage ({field} from session data)
    filler: str | None = None  # filler hint while the reply is prepared
    # The structured field the caller's answer to this action holds: that answer's audio
    # is checked again (audio verification) before it is used.
    captures: Literal["name", "date", "phone", "member_id"] | None = None


# A deterministic condition: predicate name → expected value (a list: any of them).
# Every predicate must hold. The LLM navigator reads the descriptions instead.
Condition = dict[str, Any]


class ExitSpec(_Strict):
    """A way out of a state: the navigator picks it by name when its condition holds."""

    name: str
    to: str
    description: str
    when: Condition | None = None  # None: only the LLM navigator or the engine takes it
    first: bool = False  # a global exit checked before the state's own (emergencies)


class SuperStateSpec(_Strict):
    """A container: its children inherit (and may narrow) its tools."""

    description: str
    initial: str
    parent: str | None = None
    tools: list[str] = Field(default_factory=list)
    side_loop: bool = False  # children may exit to @return (back to where the loop began)
    requires: list[str] = Field(default_factory=list)  # guards every child needs to be entered


class StateSpec(_Strict):
    type: StateType
    description: str
    parent: str | None = None
    phases: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    exits: list[ExitSpec] = Field(default_factory=list)
    action_when: dict[str, Condition] = Field(default_factory=dict)  # first that holds wins
    tools: list[str] | None = None  # None: the parent's set (or none at top level)
    tool: str | None = None  # tool_call: the designated tool
    recall: str | None = None  # recall: what to look up
    thought: str | None = None  # annotation: the inner thought
    requires: list[str] = Field(default_factory=list)  # guards that must pass to enter it

    @model_validator(mode="after")
    def _fits_its_type(self) -> StateSpec:
        required = {
            StateType.TOOL_CALL: ("tool", self.tool),
            StateType.RECALL: ("recall", self.recall),
            StateType.ANNOTATION: ("thought", self.thought),
        }
        if self.type in required and not required[self.type][1]:
            raise ValueError(f"a {self.type} state needs `{required[self.type][0]}`")
        if self.type is StateType.ACTION and not self.actions:
            raise ValueError("an action state needs at least one action")
        if self.type in PASS_THROUGH and self.actions:
            raise ValueError(f"a {self.type} state has no actions (nobody speaks in it)")
        if self.type in PASS_THROUGH and not self.exits:
            raise ValueError(f"a {self.type} state needs an exit (it is passed through)")
        if self.type is StateType.ANNOTATION and len(self.exits) != 1:
            raise ValueError("an annotation state has exactly one exit")
        names = [exit_.name for exit_ in self.exits]
        if len(names) != len(set(names)):
            raise ValueError("exit names must be unique within a state")
        stray = sorted(set(self.action_when) - set(self.actions))
        if stray:
            raise ValueError(f"action_when names actions the state does not have: {stray}")
        return self

    @property
    def is_terminal(self) -> bool:
        """Terminal: an action state with one action and zero exits."""
        return self.type is StateType.ACTION and len(self.actions) == 1 and not self.exits


class ContextGraph(_Strict):
    """One validated context graph (see the module docstring)."""

    id: str
    version: int = Field(ge=1)
    description: str
    initial_state: str
    time_limit: TimeLimitPolicy = DEFAULT_TIME_LIMIT
    phases: dict[str, str]
    actions: dict[str, ActionSpec]
    tools: dict[str, ToolSpec]
    tool_sets: dict[str, list[str]] = Field(default_factory=dict)
    super_states: dict[str, SuperStateSpec] = Field(default_factory=dict)
    states: dict[str, StateSpec]
    global_exits: list[ExitSpec] = Field(default_factory=list)  # offered by every action state

    @model_validator(mode="after")
    def _is_runnable(self) -> ContextGraph:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # --- Resolved views (computed once; the graph is immutable) ---------------------

    @cached_property
    def state_tools(self) -> dict[str, frozenset[str]]:
        """Every state's concrete tool set, inheritance and narrowing applied."""
        return {name: self._tools_of_state(name) for name in self.states}

    @cached_property
    def state_requires(self) -> dict[str, tuple[str, ...]]:
        """Every state's guards to be entered: its own, then its super-states'."""
        return {
            name: tuple(dict.fromkeys([*spec.requires, *(
                guard for parent in self.ancestors(name)
                for guard in self.super_states[parent].requires)]))
            for name, spec in self.states.items()
        }

    @cached_property
    def terminal_states(self) -> frozenset[str]:
        return frozenset(name for name, state in self.states.items() if state.is_terminal)

    def entry_state(self, target: str) -> str:
        """The leaf state a transition to `target` lands in (a super-state's initial child)."""
        seen: set[str] = set()
        while target in self.super_states:
            if target in seen:
                raise GraphError(f"super-state {target!r}: initial states loop")
            seen.add(target)
            target = self.super_states[target].initial
        return target

    def exits_of(self, state: str) -> list[ExitSpec]:
        """In the order they are tried: urgent global exits, the state's own, the other
        global exits (global ones in action states only)."""
        spec = self.states[state]
        own = list(spec.exits)
        if spec.type is not StateType.ACTION or spec.is_terminal:
            return own
        names = {exit_.name for exit_ in own}
        inside = {state, *self.ancestors(state)}  # no global exit into where the call already is
        shared = [g for g in self.global_exits if g.name not in names and g.to not in inside]
        return [g for g in shared if g.first] + own + [g for g in shared if not g.first]

    def ancestors(self, state: str) -> list[str]:
        """Super-states containing `state`, innermost first."""
        chain: list[str] = []
        parent = self._parent_of(state)
        while parent is not None and parent not in chain:
            chain.append(parent)
            parent = self.super_states[parent].parent if parent in self.super_states else None
        return chain

    def in_side_loop(self, state: str) -> bool:
        return any(self.super_states[name].side_loop for name in self.ancestors(state))

    def _parent_of(self, name: str) -> str | None:
        if name in self.states:
            return self.states[name].parent
        return self.super_states[name].parent if name in self.super_states else None

    def _tools_of_super(self, name: str) -> frozenset[str]:
        spec = self.super_states[name]
        if spec.tools:
            return expand_tools(spec.tools, self.tool_sets)
        return self._tools_of_super(spec.parent) if spec.parent else frozenset()

    def _tools_of_state(self, name: str) -> frozenset[str]:
        spec = self.states[name]
        if spec.tools is not None:
            return expand_tools(spec.tools, self.tool_sets)
        return self._tools_of_super(spec.parent) if spec.parent else frozenset()


def expand_tools(entries: list[str], tool_sets: dict[str, list[str]]) -> frozenset[str]:
    """`[BASE_TOOLS, -CreatePatient, EscalateToHuman]` → the concrete set of tool names."""
    tools: set[str] = set()
    for entry in entries:
        if entry.startswith("-"):
            tools.discard(entry[1:])
        elif entry in tool_sets:
            others = {k: v for k, v in tool_sets.items() if k != entry}  # no self-reference
            tools |= expand_tools(tool_sets[entry], others)
        else:
            tools.add(entry)
    return frozenset(tools)


def _problems(graph: ContextGraph) -> list[str]:
    """Everything wrong with a graph, each naming where (empty: it can run)."""
    problems: list[str] = []
    states, supers = graph.states, graph.super_states
    for name in set(states) & set(supers):
        problems.append(f"{name!r} is both a state and a super-state")
    if graph.initial_state not in states and graph.initial_state not in supers:
        problems.append(f"initial_state {graph.initial_state!r} is not a state")

    def tool_problems(where: str, entries: list[str]) -> None:
        for entry in entries:
            bare = entry.lstrip("-")
            if bare not in graph.tools and bare not in graph.tool_sets:
                problems.append(f"{where}: unknown tool or tool set {bare!r}")

    for set_name, entries in graph.tool_sets.items():
        tool_problems(f"tool set {set_name!r}", entries)
    for name, spec in supers.items():
        if spec.initial not in states and spec.initial not in supers:
            problems.append(f"super-state {name!r}: initial {spec.initial!r} is not a state")
        elif graph._parent_of(spec.initial) != name:
            problems.append(f"super-state {name!r}: initial {spec.initial!r} is not its child")
        if spec.parent is not None and spec.parent not in supers:
            problems.append(f"super-state {name!r}: parent {spec.parent!r} is not a super-state")
        tool_problems(f"super-state {name!r}", spec.tools)

    def exit_problems(where: str, owner: str | None, exits: list[ExitSpec]) -> None:
        for exit_ in exits:
            if exit_.to == RETURN:
                if owner is not None and not graph.in_side_loop(owner):
                    problems.append(
                        f"{where}: exit {exit_.name!r} returns but is not in a side-loop"
                    )
            elif exit_.to not in states and exit_.to not in supers:
                problems.append(f"{where}: exit {exit_.name!r} goes to unknown state {exit_.to!r}")

    for name, spec in states.items():
        where = f"state {name!r}"
        if spec.parent is not None and spec.parent not in supers:
            problems.append(f"{where}: parent {spec.parent!r} is not a super-state")
            continue
        for phase in spec.phases:
            if phase not in graph.phases:
                problems.append(f"{where}: unknown phase {phase!r}")
        for action in spec.actions:
            if action not in graph.actions:
                problems.append(f"{where}: unknown action {action!r}")
        if spec.tools is not None:
            tool_problems(where, spec.tools)
        if spec.tool is not None and spec.tool not in graph.tools:
            problems.append(f"{where}: unknown designated tool {spec.tool!r}")
        exit_problems(where, name, spec.exits)
    exit_problems("global exits", None, graph.global_exits)
    if problems:
        return problems  # the checks below need every reference resolved

    for name, spec in states.items():
        tools = graph.state_tools[name]
        if spec.parent is not None and spec.tools is not None:
            wider = tools - graph._tools_of_super(spec.parent)
            if wider:
                problems.append(
                    f"state {name!r}: tools {sorted(wider)} are not in super-state "
                    f"{spec.parent!r}'s set (children may only narrow it)"
                )
        if spec.tool is not None and spec.tool not in tools:
            problems.append(f"state {name!r}: designated tool {spec.tool!r} is not allowed in it")
    if not graph.terminal_states:
        problems.append("no terminal state (an action state with one action and no exits)")
    unreachable = sorted(set(states) - _reachable(graph))
    if unreachable:
        problems.append(f"unreachable states: {unreachable}")
    return problems


def _reachable(graph: ContextGraph) -> set[str]:
    start = graph.entry_state(graph.initial_state)
    seen, queue = {start}, deque([start])
    while queue:
        state = queue.popleft()
        for exit_ in graph.exits_of(state):
            if exit_.to == RETURN:
                continue  # back to a state already reached
            target = graph.entry_state(exit_.to)
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def parse_graph(data: Any, source: str = "<graph>") -> ContextGraph:
    """Validate already-parsed YAML (its includes resolved from the bundled graphs); errors
    name the source and the offending state."""
    try:
        data = compose(data, _raw_graph)
    except CompositionError as error:
        raise GraphError(f"{source}: {error}") from None
    try:
        return ContextGraph.model_validate(data)
    except ValidationError as error:
        lines = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"]) or "graph"
            lines.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
        raise GraphError(f"{source}: " + "; ".join(lines)) from None


def load_graph(path: Path) -> ContextGraph:
    """Read and validate one graph file."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise GraphError(f"{path}: cannot read graph ({error})") from None
    return parse_graph(data, str(path))


def _raw_graph(name: str) -> dict[str, Any]:
    """A bundled graph file or fragment (`parts/outbound`), as YAML data, for includes."""
    if not re.fullmatch(r"(?:parts/)?[a-z0-9_]{1,64}", name):
        raise CompositionError(f"{name!r} is not a bundled graph or part name")
    path = GRAPHS_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise CompositionError(f"cannot read included {name!r} ({error})") from None
    if not isinstance(data, dict):
        raise CompositionError(f"included {name!r} is not a mapping")
    return data


def bundled_graph(graph_id: str) -> ContextGraph:
    """A graph shipped in `flows/graphs/` (e.g. `clinic_booking`)."""
    if not re.fullmatch(r"[a-z0-9_]{1,64}", graph_id):
        raise GraphError(f"{graph_id!r} is not a graph name (lower-case letters, digits, _)")
    return load_graph(GRAPHS_DIR / f"{graph_id}.yaml")


def visible_tools(graph: ContextGraph, state: str, *, identified: bool) -> frozenset[str]:
    """The state's tools this caller may be offered (by whether they are identified)."""
    allowed = graph.state_tools.get(state, frozenset())
    if identified:
        return allowed
    return frozenset(
        name for name in allowed
        if graph.tools[name].kind != "write" or graph.tools[name].unidentified
    )
