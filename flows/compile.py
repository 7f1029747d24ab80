"""Graph states as `pipecat.flows` nodes: the engage LLM's task and its tools, per state.

When an LLM speaks for the agent, each navigation decision becomes the node the Flows
manager runs: a developer message with the state's task and the chosen action, and
exactly the tools the state allows (seed 002's gating), each a `FlowsFunctionSchema`
whose handler goes through `BookingTools.call` — so the state's gate and the guards apply
to the model's calls as they do to the deterministic engine's: an early booking is
answered "blocked: ...", never written. The navigator, not the model, moves between
states, so nodes carry no transition functions.
"""

from __future__ import annotations

from typing import Any

from pipecat.flows import ContextStrategy, ContextStrategyConfig, FlowsFunctionSchema, NodeConfig

from flows.graph import ContextGraph
from flows.tools import BookingTools
from services.prompts import render_prompt


def tool_schema(
    graph: ContextGraph, tools: BookingTools, state: str, name: str
) -> FlowsFunctionSchema:
    """One allowed tool as a Flows function bound to this state."""
    spec = graph.tools[name]

    async def handler(args: dict[str, Any], flow_manager: Any) -> tuple[str, None]:
        result = await tools.call(state, name, args)
        return result.text, None  # stay in the node: the navigator moves the call on

    return FlowsFunctionSchema(
        name=name, description=spec.description, properties=dict(spec.parameters),
        required=list(spec.required), handler=handler,
    )


def node_for(graph: ContextGraph, tools: BookingTools, state: str, action: str) -> NodeConfig:
    """The Flows node for speaking `action` in `state`."""
    spec = graph.states[state]
    task = render_prompt(
        "navigator/engage_task.md", state=state, state_description=spec.description,
        action=action, action_description=graph.actions[action].description,
    )
    return NodeConfig(
        name=state,
        task_messages=[{"role": "developer", "content": task}],
        functions=[tool_schema(graph, tools, state, name)
                   for name in sorted(graph.state_tools[state])],
        context_strategy=ContextStrategyConfig(strategy=ContextStrategy.APPEND),
        respond_immediately=False,
    )
