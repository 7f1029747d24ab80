"""The state guide: a service's context graph merged with what calls did.

The database hands over aggregates of the last N calls (`db/insights.py`, one grouped
query per table); `state_guide` joins them with the graph the service runs, in plain
Python so it is tested without a database: which canonical states were reached and how
often, which never were, which states calls reached that the graph does not define
(an older graph version, a renamed state), the exits taken out of each state, and every
tool's outcomes split into three error classes (guard: the graph refused an eager
call; pms: the practice system failed; other: timeouts and the unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from db.insights import CallAggregates, ToolCount, ValueCount
from flows.graph import RETURN, ContextGraph

# Error classes the tool layer writes (flows/graph_tools.py); anything else counts as "other".
GUARD, PMS = "guard", "pms"


# --- The guide (outputs) --------------------------------------------------------------


@dataclass(frozen=True)
class StateEntry:
    """A canonical state of the graph and what calls did with it."""

    name: str
    type: str
    description: str
    parent: str | None
    super_states: list[str]  # innermost first
    phases: list[str]
    tools: list[str]
    exits: list[str]
    initial: bool
    terminal: bool
    times_observed: int
    calls_reached: int
    never_observed: bool
    last_seen: datetime | None


@dataclass(frozen=True)
class SuperStateEntry:
    """A container: its leaves and how often calls were in any of them."""

    name: str
    description: str
    parent: str | None
    initial: str
    side_loop: bool
    leaves: list[str]
    leaves_observed: int
    observed_total: int  # entries into its leaves
    directly_observed: int  # transitions naming the container itself


@dataclass(frozen=True)
class ObservedOnlyState:
    """Calls reached it, the graph has no such state: "undocumented but observed"."""

    name: str
    times_observed: int
    calls_reached: int
    last_seen: datetime | None


@dataclass(frozen=True)
class TriggerEntry:
    state: str | None
    exit: str | None
    to: str
    count: int
    canonical: bool  # the graph offers this exit from this state
    last_seen: datetime | None


@dataclass(frozen=True)
class ToolEntry:
    name: str
    kind: str | None  # read / write / handoff; None when the graph has no such tool
    canonical: bool
    allowed_in: list[str]
    calls: int
    ok: int
    guard: int
    pms: int
    other: int
    error_pct: float | None  # None: never called
    last_seen: datetime | None


@dataclass(frozen=True)
class StateGuide:
    graph_id: str
    graph_version: int
    calls_analyzed: int
    first_started_at: datetime | None
    last_started_at: datetime | None
    canonical_states: int
    observed_states: int  # canonical states calls reached
    phases: dict[str, str]
    states: list[StateEntry]
    super_states: list[SuperStateEntry]
    undocumented: list[ObservedOnlyState]
    triggers: list[TriggerEntry]
    tools: list[ToolEntry]
    completion_reasons: list[ValueCount]
    final_states: list[ValueCount]


def error_pct(errors: int, calls: int) -> float | None:
    """Errors as a percentage with one decimal, halves rounded up (12.25 → 12.3)."""
    if calls <= 0:
        return None
    exact = Decimal(errors) * 100 / Decimal(calls)
    return float(exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def _tool_entry(name: str, graph: ContextGraph, count: ToolCount | None) -> ToolEntry:
    spec = graph.tools.get(name)
    classes = count.error_classes if count else {}
    guard, pms = classes.get(GUARD, 0), classes.get(PMS, 0)
    other = sum(n for cls, n in classes.items() if cls not in (GUARD, PMS))
    calls = count.calls if count else 0
    return ToolEntry(
        name=name,
        kind=spec.kind if spec else None,
        canonical=spec is not None,
        allowed_in=sorted(s for s, tools in graph.state_tools.items() if name in tools),
        calls=calls,
        ok=calls - guard - pms - other,
        guard=guard,
        pms=pms,
        other=other,
        error_pct=error_pct(guard + pms + other, calls),
        last_seen=count.last_seen if count else None,
    )


def _is_canonical_exit(graph: ContextGraph, state: str | None, name: str | None, to: str) -> bool:
    if state is None or state not in graph.states or name is None:
        return False
    return any(
        exit_.name == name
        and (exit_.to in (to, RETURN) or graph.entry_state(exit_.to) == to)
        for exit_ in graph.exits_of(state)
    )


def state_guide(graph: ContextGraph, seen: CallAggregates) -> StateGuide:
    """Merge the graph with the aggregates (see the module docstring)."""
    by_state = {s.state: s for s in seen.states}
    states: list[StateEntry] = []
    for name, spec in graph.states.items():
        count = by_state.get(name)
        states.append(StateEntry(
            name=name,
            type=str(spec.type),
            description=spec.description,
            parent=spec.parent,
            super_states=graph.ancestors(name),
            phases=list(spec.phases),
            tools=sorted(graph.state_tools[name]),
            exits=[exit_.name for exit_ in spec.exits],
            initial=name == graph.initial_state,
            terminal=spec.is_terminal,
            times_observed=count.times if count else 0,
            calls_reached=count.calls if count else 0,
            never_observed=count is None or count.times == 0,
            last_seen=count.last_seen if count else None,
        ))

    supers: list[SuperStateEntry] = []
    for name, spec in graph.super_states.items():
        leaves = [s.name for s in states if name in s.super_states]
        observed = [by_state[leaf] for leaf in leaves if leaf in by_state]
        direct = by_state.get(name)
        supers.append(SuperStateEntry(
            name=name,
            description=spec.description,
            parent=spec.parent,
            initial=spec.initial,
            side_loop=spec.side_loop,
            leaves=leaves,
            leaves_observed=sum(1 for c in observed if c.times > 0),
            observed_total=sum(c.times for c in observed),
            directly_observed=direct.times if direct else 0,
        ))

    undocumented = sorted(
        (ObservedOnlyState(c.state, c.times, c.calls, c.last_seen) for c in seen.states
         if c.state not in graph.states and c.state not in graph.super_states),
        key=lambda s: (-s.times_observed, s.name),
    )

    triggers = sorted(
        (TriggerEntry(
            state=t.state, exit=t.reason, to=t.to, count=t.count,
            canonical=_is_canonical_exit(graph, t.state, t.reason, t.to), last_seen=t.last_seen,
        ) for t in seen.triggers),
        key=lambda t: (-t.count, t.state or "", t.exit or "", t.to),
    )

    tool_counts = {t.name: t for t in seen.tools}
    tools = [_tool_entry(name, graph, tool_counts.get(name))
             for name in sorted(set(graph.tools) | set(tool_counts))]
    tools.sort(key=lambda t: (-t.calls, t.name))

    return StateGuide(
        graph_id=graph.id,
        graph_version=graph.version,
        calls_analyzed=seen.calls,
        first_started_at=seen.first_started_at,
        last_started_at=seen.last_started_at,
        canonical_states=len(states),
        observed_states=sum(1 for s in states if not s.never_observed),
        phases=dict(graph.phases),
        states=states,
        super_states=supers,
        undocumented=undocumented,
        triggers=triggers,
        tools=tools,
        completion_reasons=sorted(seen.completion_reasons, key=lambda v: (-v.count, v.value or "")),
        final_states=sorted(seen.final_states, key=lambda v: (-v.count, v.value or "")),
    )
