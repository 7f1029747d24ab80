"""The ambient channel end to end: what the engage LLM is told at the caller's first
turn, from the demo clinic's records, for a known caller and for a stranger."""

from __future__ import annotations

from pipecat.frames.frames import LLMContextFrame, LLMUpdateSettingsFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from call.frames import NavigationFrame
from call.identity import CallIdentity
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_navigator_processor import GraphNavigatorProcessor
from flows.graph_session import GraphSession
from tests.fakes import make_session
from tests.world.conftest import TODAY, Clinic


class RecordingFlows:
    """Stands in for the Flows manager: keeps the nodes it is asked to enter."""

    def __init__(self) -> None:
        self.nodes: list[dict] = []

    async def initialize(self) -> None:
        pass

    async def set_node_from_config(self, node) -> None:
        self.nodes.append(node)


async def first_turn_instruction(db, clinic: Clinic, writer, caller_phone: str,
                                 dialled: str | None = None) -> str:
    session = make_session(writer)
    session.instruction.base = "You are the scheduling assistant."
    booking = GraphSession(identity=CallIdentity(
        await clinic.call(db), clinic.workspace_id, clinic.service_id, caller_phone))
    engine = GraphEngine(bundled_graph("clinic_booking"), booking, db.pool, session.log,
                           clinic_name="Demo Clinic", emergency_number="911",
                           today=lambda: TODAY, dialled_number=dialled)
    navigator = GraphNavigatorProcessor(session, engine)
    navigator.engage_with(RecordingFlows())
    turn = LLMContextFrame(context=LLMContext(messages=[
        {"role": "user", "content": "Hi, I'd like to book a check-up"}]))
    down, _ = await run_test(navigator, frames_to_send=[turn, SleepFrame(0.2)],
                             expected_down_frames=[NavigationFrame, LLMUpdateSettingsFrame])
    instruction = down[1].delta.system_instruction
    assert instruction == session.instruction.text  # the base and the world block
    return instruction


async def test_an_identified_caller_s_chart_is_in_the_prompt(db, clinic, writer):
    instruction = await first_turn_instruction(db, clinic, writer, "+15550100205")

    assert instruction.startswith("You are the scheduling assistant.")
    for fact in ("Henry Walsh (P1), born 1962-04-17", "MRN MRN-100207", "Type 2 diabetes",
                 "Metformin 500 mg twice daily", "Aetna Choice POS II, member id W123456789",
                 "A1: Blood test with Grace Liu", "Appointment types:"):
        assert fact in instruction
    [event] = writer.events("world_context")
    assert event.data["identified"] is True
    assert "Walsh" not in str(event.data)  # the record keeps sizes, never the chart


async def test_an_unknown_caller_gets_the_clinic_and_nobody_s_record(db, clinic, writer):
    instruction = await first_turn_instruction(db, clinic, writer, "+15550109999",
                                               dialled="+15550100111")

    assert "(P1)" not in instruction and "MRN" not in instruction
    assert "Called location: Northside, 45 Lake Avenue" in instruction
    assert "Downtown" not in instruction  # the location they dialled, not every location
    assert writer.events("world_context")[0].data["identified"] is False
