"""The navigator processor speaks the engine's reply like an LLM would, or steps aside."""

import json
import time
from datetime import date

import pytest
from pipecat.frames.frames import (
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMRunFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from call.frames import EndCallFrame, NavigationFrame
from call.identity import CallIdentity
from flows.graph import bundled_graph, visible_tools
from flows.graph_engine import GraphEngine, Reply
from flows.graph_navigator_processor import GraphNavigatorProcessor
from flows.graph_session import GraphSession
from flows.llm_navigator import LLMNavigator
from flows.navigator import NavDecision
from flows.router import NO_ROUTE
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.fillers import filler_set
from services.emotion.reading import EmotionReading, Source
from tests.fakes import ScriptedModel, choice


class ScriptedEngine:
    """Stands in for GraphEngine: answers each turn with the next scripted reply."""

    graph = bundled_graph("clinic_booking")
    navigates_by_model = False

    def __init__(self, *replies: Reply, fail_on_turn: bool = False) -> None:
        self.replies = list(replies)
        self.fail_on_turn = fail_on_turn
        self.failed = False
        self.heard: list[str] = []

    async def start(self) -> None:
        pass

    async def refresh_chart(self) -> None:
        pass

    def ambient(self) -> str:
        return ""  # no clinic records behind this engine

    def expected_field(self) -> str | None:
        return None  # no question for structured data is open

    async def turn(self, text: str, *, filler=None) -> Reply:
        self.heard.append(text)
        if self.fail_on_turn:
            self.failed = True
            return Reply("")
        return self.replies.pop(0)


def reply(text: str, state: str = "booking_discovery", **kwargs) -> Reply:
    decision = NavDecision(state=state, action="ask_how_can_help", route=NO_ROUTE)
    return Reply(text, [decision], nav_ms=0.4, **kwargs)


def caller_says(text: str) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]))


async def test_the_engine_answers_and_the_turn_goes_no_further(session):
    engine = ScriptedEngine(reply("What day suits you?"))
    down, _ = await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("I'd like to book")],
        expected_down_frames=[NavigationFrame, LLMFullResponseStartFrame, LLMTextFrame,
                              LLMFullResponseEndFrame],
    )
    assert engine.heard == ["I'd like to book"]
    assert down[2].text == "What day suits you?" and down[0].nav_ms == 0.4


async def test_when_the_graph_fails_the_turn_goes_on_to_static_prompt_mode(session):
    engine = ScriptedEngine(fail_on_turn=True)
    await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("hello")],
        expected_down_frames=[LLMContextFrame],
    )


async def test_a_transfer_is_kept_for_after_the_goodbye(session):
    engine = ScriptedEngine(
        reply("Putting you through now. Goodbye.", "closing", end_call=True,
              transfer_to="+15550100110")
    )
    down, _ = await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("yes please")],
        expected_down_frames=[NavigationFrame, LLMFullResponseStartFrame, LLMTextFrame,
                              LLMFullResponseEndFrame, EndCallFrame],
    )
    assert down[-1].reason == "transferred" and session.transfer_to == "+15550100110"


async def test_an_engine_that_crashes_leaves_the_turn_to_static_prompt_mode(session, writer):
    class CrashingEngine(ScriptedEngine):
        async def turn(self, text: str, *, filler=None) -> Reply:
            raise RuntimeError("bug")

    engine = CrashingEngine()
    await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("hello")],
        expected_down_frames=[LLMContextFrame],
    )
    assert engine.failed
    assert writer.events("context_graph_failed")[0].data == {"error": "RuntimeError"}


async def test_a_model_navigators_filler_is_spoken_before_the_answer(session, writer):
    graph = bundled_graph("clinic_booking")
    model = ScriptedModel(
        json.dumps({"choice": "teleport", "filler": "One moment."}),  # invalid: asked again
        choice("caller_spoke"), choice("book_new"), choice("ask_visit_reason"),
    )
    booking = GraphSession(identity=CallIdentity("call-1", "w", "s"),
                             services_read=True, upcoming=[])
    engine = GraphEngine(
        graph, booking, pool=None, log=session.log, clinic_name="Riverside Clinic",
        emergency_number="911", today=lambda: date(2026, 11, 24),
        navigator=LLMNavigator(graph, model, session.log, clinic_name="Riverside Clinic"),
    )
    down, _ = await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("I'd like to book something")],
        expected_down_frames=[TTSSpeakFrame, NavigationFrame, LLMFullResponseStartFrame,
                              LLMTextFrame, LLMFullResponseEndFrame],
    )
    assert down[0].text == "One moment." and down[0].append_to_context is False
    assert (down[1].state, down[1].action) == ("resolving_service", "ask_visit_reason")
    assert writer.events("filler")[0].data["said"] == "One moment."


class RecordingFlows:
    """Stands in for the Flows manager: keeps the nodes it is asked to enter."""

    def __init__(self, fail: bool = False) -> None:
        self.nodes: list[dict] = []
        self.fail = fail

    async def initialize(self) -> None:
        pass

    async def set_node_from_config(self, node) -> None:
        if self.fail:
            raise RuntimeError("node rejected")
        self.nodes.append(node)


def engine_for(session, navigator=None) -> GraphEngine:
    graph = bundled_graph("clinic_booking")
    booking = GraphSession(identity=CallIdentity("call-1", "w", "s"),
                             services_read=True, upcoming=[])
    return GraphEngine(graph, booking, pool=None, log=session.log,
                         clinic_name="Riverside Clinic", emergency_number="911",
                         today=lambda: date(2026, 11, 24), navigator=navigator)


async def test_with_an_llm_the_turn_becomes_the_flows_node_the_llm_runs(session):
    flows = RecordingFlows()
    navigator = GraphNavigatorProcessor(session, engine_for(session))
    navigator.engage_with(flows)
    down, _ = await run_test(
        navigator,
        frames_to_send=[caller_says("I'd like to book an appointment"), SleepFrame(0.05)],
        expected_down_frames=[NavigationFrame],
    )
    [node] = flows.nodes
    state = down[0].state
    assert node["name"] == state == "collecting_new_patient"  # not known on this number
    assert f"Do now: {down[0].action}" in node["task_messages"][0]["content"]
    tools = {f.name for f in node["functions"]}
    assert tools == visible_tools(bundled_graph("clinic_booking"), state, identified=False)
    assert "CreatePatient" in tools  # the one write offered before the caller is identified
    assert not tools & {"CreateAppointment", "UpdatePatient", "CreateInsurance"}


async def test_a_flows_context_frame_passes_to_the_llm_untouched(session):
    navigator = GraphNavigatorProcessor(session, engine_for(session))
    navigator.engage_with(RecordingFlows())
    task_run = LLMContextFrame(context=LLMContext(messages=[
        {"role": "user", "content": "I'd like to book"},
        {"role": "developer", "content": "Do now: ask_service"},
    ]))
    await run_test(navigator, frames_to_send=[task_run], expected_down_frames=[LLMContextFrame])


async def test_when_flows_cannot_enter_the_node_the_llm_answers_in_static_prompt_mode(
    session, writer
):
    navigator = GraphNavigatorProcessor(session, engine_for(session))
    navigator.engage_with(RecordingFlows(fail=True))
    await run_test(
        navigator,
        frames_to_send=[caller_says("I'd like to book an appointment"), SleepFrame(0.1)],
        expected_down_frames=[NavigationFrame, LLMRunFrame],
    )
    assert [e.data for e in writer.events("context_graph_failed")] == [{"error": "RuntimeError"}]


def emotion_with(*readings: EmotionReading) -> CallEmotion:
    emotion = CallEmotion()
    for reading in readings:
        emotion.state.add(reading)
    return emotion


def heard(label: str, at: float) -> EmotionReading:
    return EmotionReading(Source.PROSODY, {label: 0.8}, at)


@pytest.mark.parametrize(("caller", "register"), [
    ((), "neutral"),  # nothing heard yet: a plain filler
    (("Anxiety", "Anxiety"), "reassuring"),  # anxiety: reassured
    (("Anger", "Anger"), "suppressed"),  # frustration: the answer, not filler
])
async def test_the_wait_for_the_llm_is_covered_in_the_callers_register(
    session, writer, caller, register
):
    now = time.monotonic()
    emotion = emotion_with(*(heard(label, now - i) for i, label in enumerate(caller)))
    navigator = GraphNavigatorProcessor(session, engine_for(session), emotion=emotion)
    navigator.engage_with(RecordingFlows())
    phrases = [] if register == "suppressed" else filler_set().registers[register].short
    expected = [NavigationFrame, TTSSpeakFrame] if phrases else [NavigationFrame]
    down, _ = await run_test(
        navigator, frames_to_send=[caller_says("I'd like to book an appointment"),
                                   SleepFrame(0.05)],
        expected_down_frames=expected,
    )
    [event] = writer.events("filler")
    assert event.data["register"] == register
    if phrases:
        assert event.data["said"] in phrases and down[1].text == event.data["said"]
        assert down[1].append_to_context is False
    else:
        assert event.data["said"] is None


async def test_offline_lines_need_no_filler_but_a_frustrated_callers_turns_record_why(
    session, writer
):
    now = time.monotonic()
    emotion = emotion_with(heard("Anger", now - 1), heard("Anger", now))
    await run_test(GraphNavigatorProcessor(session, ScriptedEngine(reply("Which day suits you?")),
                                  emotion=emotion),
                   frames_to_send=[caller_says("I need an appointment")],
                   expected_down_frames=[NavigationFrame, LLMFullResponseStartFrame,
                                         LLMTextFrame, LLMFullResponseEndFrame])
    assert [e.data["register"] for e in writer.events("filler")] == ["suppressed"]
    assert emotion.latency.expected_ms("offline_turn") < 700  # learnt from the turn
