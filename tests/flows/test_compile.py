"""Each decision becomes a Flows node offering exactly its state's tools; a premature
booking is refused; a write moves the node on; the terminal node hangs up after its goodbye."""

import json
from datetime import date

from call.call_session import CallLog
from call.identity import CallIdentity
from db.scheduling import Patient
from flows.compile import EngageNodes
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from flows.navigator import NavDecision
from flows.router import NO_ROUTE
from tests.fakes import CollectingWriter

GRAPH = bundled_graph("clinic_booking")
PRIYA = Patient("p-priya", "Priya", "Nair", date(1985, 9, 30), "+15550100204")


async def hang_up(_action, _flow_manager) -> None:
    """Stands in for the navigator's end-of-call action."""


def nodes(writer: CollectingWriter, state: str = "init") -> EngageNodes:
    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA)
    engine = GraphEngine(GRAPH, session, pool=None, log=CallLog("c", writer),
                           clinic_name="Demo Family Clinic", emergency_number="911")
    engine.state = state
    return EngageNodes(engine, end_call=hang_up)


def node_for(engage: EngageNodes, state: str, action: str):
    spec = GRAPH.states[state]
    return engage.node(NavDecision(state=state, action=action, route=NO_ROUTE,
                                   terminal=spec.is_terminal))


def test_every_state_offers_the_llm_exactly_its_allowed_tools_with_their_schemas():
    engage = nodes(CollectingWriter())
    for state, spec in GRAPH.states.items():
        action = spec.actions[0] if spec.actions else None
        if action is None:
            continue  # pass-through states never speak
        node = node_for(engage, state, action)
        assert {f.name for f in node["functions"]} == GRAPH.state_tools[state], state
        task = node["task_messages"][0]["content"]
        assert action in task and "911" in task and "Priya" in task
        assert bool(node.get("post_actions")) is spec.is_terminal, state
    confirm = node_for(engage, "awaiting_final_confirmation", "final_slot_confirmation")
    create = next(f for f in confirm["functions"] if f.name == "CreateAppointment")
    assert create.required == ["slot_ref"] and "slot_ref" in create.properties
    json.dumps(create.to_function_schema().properties)  # serialisable for any provider


async def test_an_llm_booking_before_the_caller_confirmed_is_blocked_and_recorded():
    writer = CollectingWriter()
    engage = nodes(writer, "awaiting_final_confirmation")
    node = node_for(engage, "awaiting_final_confirmation", "final_slot_confirmation")
    create = next(f for f in node["functions"] if f.name == "CreateAppointment")
    result, next_node = await create.handler({"slot_ref": "S1"}, None)
    assert result.startswith("blocked:") and next_node is None
    (record,) = writer.of_type("ToolCallRecord")
    assert (record.name, record.error_class) == ("CreateAppointment", "guard")
    assert record.succeeded is False


async def test_a_tool_the_state_does_not_offer_is_refused_even_if_called():
    writer = CollectingWriter()
    engage = nodes(writer, "offering_slots")
    node = node_for(engage, "offering_slots", "propose_initial_slot")
    assert "CheckAvailability" not in {f.name for f in node["functions"]}
    result = await engage.engine.tools.call(
        "offering_slots", "CancelAppt", {"appointment_ref": "A1"})
    assert result.error_class == "guard" and "not available" in result.text
