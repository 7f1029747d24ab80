"""A call whose start-up work fails still answers its caller: a prefetch that fails or
outlasts its bound leaves the call unidentified (on record), a slow one holds the first
turn only up to its bound, and a graph that cannot load leaves calls in static prompt mode.
"""

import asyncio
import time

from pipecat.frames.frames import LLMFullResponseStartFrame, LLMTextFrame
from pipecat.tests.utils import run_test

import flows.graph_navigator_processor as navigator_processor
from call.call_session import CallLog
from call.frames import NavigationFrame
from call.identity import CallIdentity
from config import Settings
from flows import graph_engine
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_navigator_processor import GraphNavigatorProcessor
from flows.graph_session import GraphSession
from runner.runtime import load_context_graph
from tests.fakes import CollectingWriter
from tests.processors.test_graph_navigator import ScriptedEngine, caller_says, reply

GRAPH = bundled_graph("clinic_booking")
PRIYA_PHONE = "+15550100204"


async def never_answers(_session, _pool) -> None:
    await asyncio.sleep(60)


def engine_for(writer: CollectingWriter) -> GraphEngine:
    session = GraphSession(identity=CallIdentity("c", "w", "s", PRIYA_PHONE))
    return GraphEngine(GRAPH, session, None, CallLog("c", writer), clinic_name="Demo Clinic",
                       emergency_number="911")


async def test_a_prefetch_the_database_does_not_answer_is_given_up_and_recorded(monkeypatch):
    monkeypatch.setattr(graph_engine, "PREFETCH_TIMEOUT_S", 0.1)
    monkeypatch.setitem(graph_engine.RECALLS, "caller_context", never_answers)
    writer = CollectingWriter()
    engine = engine_for(writer)
    started = time.monotonic()

    await engine.start()

    assert time.monotonic() - started < 1.0
    # The call is past init, ready to greet: unidentified, never stuck waiting.
    assert engine.state != GRAPH.initial_state and engine.session.patient is None
    assert [e.data for e in writer.events("prefetch_failed")] == [
        {"error": "DatabaseUnavailable"}]


async def test_a_slow_prefetch_holds_the_first_turn_only_up_to_its_bound(monkeypatch, session,
                                                                         writer):
    monkeypatch.setattr(navigator_processor, "PREFETCH_WAIT_S", 0.1)

    class SlowStart(ScriptedEngine):
        async def start(self) -> None:
            await asyncio.sleep(5)

    engine = SlowStart(reply("What day suits you?"))
    down, _ = await run_test(
        GraphNavigatorProcessor(session, engine),
        frames_to_send=[caller_says("I'd like to book")],
    )

    assert engine.heard == ["I'd like to book"]
    spoken = [f.text for f in down if isinstance(f, LLMTextFrame)]
    assert spoken == ["What day suits you?"]
    assert any(isinstance(f, NavigationFrame) for f in down)
    assert any(isinstance(f, LLMFullResponseStartFrame) for f in down)
    assert [e.data for e in writer.events("prefetch_slow")] == [{"waited_ms": 100}]


def test_a_graph_that_cannot_load_leaves_calls_in_static_prompt_mode(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, context_graph="no_such_graph")

    assert load_context_graph(settings) is None
