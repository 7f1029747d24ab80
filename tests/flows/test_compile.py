"""Each state becomes a Flows node offering exactly its tools; a premature booking is refused."""

import json
from datetime import date

from db.scheduling import Patient
from flows.compile import node_for
from flows.graph import bundled_graph
from flows.session import BookingSession
from flows.tools import BookingTools
from services.call_session import CallLog
from tests.fakes import CollectingWriter

GRAPH = bundled_graph("clinic_booking")
PRIYA = Patient("p-priya", "Priya", "Nair", date(1985, 9, 30), "+15550100204")


def tools(writer: CollectingWriter) -> BookingTools:
    session = BookingSession(call_id="c", workspace_id="w", service_id="s", patient=PRIYA)
    return BookingTools(GRAPH, session, pool=None, log=CallLog("c", writer))


def test_every_state_offers_the_llm_exactly_its_allowed_tools_with_their_schemas():
    booking_tools = tools(CollectingWriter())
    for state, spec in GRAPH.states.items():
        action = spec.actions[0] if spec.actions else None
        if action is None:
            continue  # pass-through states never speak
        node = node_for(GRAPH, booking_tools, state, action)
        assert {f.name for f in node["functions"]} == GRAPH.state_tools[state], state
        assert action in node["task_messages"][0]["content"]
    confirm = node_for(
        GRAPH, booking_tools, "awaiting_final_confirmation", "final_slot_confirmation"
    )
    create = next(f for f in confirm["functions"] if f.name == "CreateAppointment")
    assert create.required == ["slot_ref"] and "slot_ref" in create.properties
    json.dumps(create.to_function_schema().properties)  # serialisable for any provider


async def test_an_llm_booking_before_the_caller_confirmed_is_blocked_and_recorded():
    writer = CollectingWriter()
    booking_tools = tools(writer)
    node = node_for(GRAPH, booking_tools, "awaiting_final_confirmation", "final_slot_confirmation")
    create = next(f for f in node["functions"] if f.name == "CreateAppointment")
    result, next_node = await create.handler({"slot_ref": "S1"}, None)
    assert result.startswith("blocked:") and next_node is None
    (record,) = writer.of_type("ToolCallRecord")
    assert (record.name, record.error_class) == ("CreateAppointment", "guard")
    assert record.succeeded is False


async def test_a_tool_the_state_does_not_offer_is_refused_even_if_called():
    writer = CollectingWriter()
    node = node_for(GRAPH, tools(writer), "offering_slots", "propose_initial_slot")
    assert "CheckAvailability" not in {f.name for f in node["functions"]}
    result = await tools(writer).call("offering_slots", "CancelAppt", {"appointment_ref": "A1"})
    assert result.error_class == "guard" and "not available" in result.text
