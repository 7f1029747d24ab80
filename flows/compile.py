"""Graph states as `pipecat.flows` nodes: the engage LLM's task and its tools, per decision.

When an LLM speaks for the agent, each navigation decision becomes the node the Flows
manager enters: a developer message with the state's task, the chosen action and what
the call has settled, and exactly the tools the state allows, each a
`FlowsFunctionSchema` whose handler goes through `GraphTools.call` — so the state's
gate and the guards apply to the model's calls as they do to the offline engine's: an
early booking is answered "blocked: ...", never written. The navigator moves the call
between states on caller turns; what a tool does moves it too (booked → wrap-up, slots
offered → choosing): the handler returns the node the outcome opens and Flows
transitions there. A terminal
state's node ends the call once its goodbye has been spoken (a Flows function action,
which runs when everything before it has played).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pipecat.flows import ContextStrategy, ContextStrategyConfig, FlowsFunctionSchema, NodeConfig

from flows.graph import visible_tools
from flows.graph_engine import GraphEngine
from flows.navigator import NavDecision
from lib.prompts import render_prompt

# Runs after the terminal state's goodbye has played (a Flows function action).
EndCall = Callable[[dict[str, Any], Any], Awaitable[None]]


class EngageNodes:
    """The Flows nodes of one call, built from its engine's decisions."""

    def __init__(self, engine: GraphEngine, *, end_call: EndCall) -> None:
        self.engine = engine
        self.end_call = end_call

    def node(self, decision: NavDecision) -> NodeConfig:
        """The node for speaking `decision.action` in `decision.state`."""
        graph, engine = self.engine.graph, self.engine
        spec = graph.states[decision.state]
        task = render_prompt(
            "navigator/engage_task.md", state=decision.state,
            state_description=spec.description, action=decision.action,
            action_description=graph.actions[decision.action].description,
            facts=json.dumps(engine.session.facts()), emergency_number=engine.emergency_number,
            clinic_name=engine.clinic_name,
        )
        callee = engine.session.callee
        if callee is not None:  # a call the clinic made: what may be said before the check
            task += "\n\n" + render_prompt(
                "navigator/outbound.md", callee=callee.first_name or "someone who asked for a call")
        node = NodeConfig(
            name=decision.state,
            task_messages=[{"role": "developer", "content": task}],
            functions=[self._tool(decision.state, name) for name in sorted(visible_tools(
                graph, decision.state, identified=engine.session.patient is not None))],
            context_strategy=ContextStrategyConfig(strategy=ContextStrategy.APPEND),
            respond_immediately=True,
        )
        if decision.terminal:
            node["post_actions"] = [{"type": "function", "handler": self.end_call}]
        return node

    def _tool(self, state: str, name: str) -> FlowsFunctionSchema:
        """One allowed tool as a Flows function bound to this state."""
        spec = self.engine.graph.tools[name]

        async def handler(args: dict[str, Any], _flow_manager: Any) -> tuple[str, Any]:
            result = await self.engine.tools.call(state, name, args)
            if not result.ok or self.engine.state != state:
                return result.text, None  # stay: the navigator moves the call on
            after = await self.engine.settle()
            return result.text, (self.node(after) if after is not None else None)

        return FlowsFunctionSchema(
            name=name, description=spec.description, properties=dict(spec.parameters),
            required=list(spec.required), handler=handler,
        )
