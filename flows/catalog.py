"""Graphs the engine can run: a graph loads only if every name in it means something here.

The graph format (flows/graph.py) is generic; this is where a graph meets this
engine: its guards must exist (flows/guards), its conditions must be ones the
deterministic navigator evaluates (flows/navigator), its recall states must name
lookups this engine has (flows/recalls), its tools handlers (flows/graph_tools, checked
when a call's tools are built), and every action needs a line for the offline voice
(flows/engage_local). Checked once, at start-up.
"""

from __future__ import annotations

from flows.engage_local import missing_lines
from flows.graph import ContextGraph, GraphError, bundled_graph
from flows.graph_tools import unknown_tools
from flows.guards import unknown_guards
from flows.navigator import condition_problems
from flows.recalls import unknown_recalls


def engine_problems(graph: ContextGraph) -> list[str]:
    problems = [f"unknown guard {name!r}" for name in unknown_guards(graph)]
    problems += condition_problems(graph)
    problems += [f"unknown recall {name!r}" for name in unknown_recalls(graph)]
    problems += [f"tool {name!r} has no handler" for name in unknown_tools(graph)]
    problems += [f"action {name!r} has no spoken line" for name in missing_lines(graph)]
    return problems


# What every graph an outbound call runs must have (graphs/parts/outbound.yaml).
OUTBOUND_STATES = ("checking_person", "about_the_call", "opting_out")


def outbound_problems(graph: ContextGraph) -> list[str]:
    """Why `graph` cannot carry a call the clinic makes (empty: it can): without the
    right-person check in front, a stored version made before it would talk about the
    patient's care to whoever answers."""
    problems = [f"no state {name!r}" for name in OUTBOUND_STATES if name not in graph.states]
    if "right_person_confirmed" not in graph.state_requires.get("about_the_call", ()):
        problems.append("about_the_call does not require right_person_confirmed")
    return problems


def runnable_graph(graph_id: str) -> ContextGraph:
    """The bundled graph, checked against this engine (GraphError naming every problem)."""
    graph = bundled_graph(graph_id)
    problems = engine_problems(graph)
    if problems:
        raise GraphError(f"graph {graph_id!r} cannot run here: " + "; ".join(problems))
    return graph
