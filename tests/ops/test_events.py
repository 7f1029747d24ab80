"""The mapping from call records to observer events, and the per-call sequence."""

from __future__ import annotations

from call.call_session import CallLog
from ops.bus import InProcessBus
from ops.events import TOOL_OUTPUT_CHARS, CallContext, ObserverEvent, observer_events
from ops.feed import CallFeed
from ops.registry import ActiveCall, LocalRegistry
from tests.fakes import CollectingWriter


def ctx() -> CallContext:
    return CallContext(call_id="c1", workspace_id="w1", service_id="s1", call_sid="CA1",
                       initial_state="greeting", navigator_model="rules")


def test_call_started_is_session_start_with_who_the_call_is():
    context = ctx()
    [(kind, data)] = observer_events("event", {"type": "call_started", "data": {"mode": "text"},
                                               "at_ms": 0}, context)
    assert kind == "session_start"
    assert data == {"call_sid": "CA1", "service_id": "s1", "workspace_id": "w1",
                    "initial_state": "greeting", "trace_id": "c1", "mode": "text"}
    assert context.state == "greeting"


def test_turns_become_transcripts_and_agent_turns_carry_timing():
    context = ctx()
    context.state = "collect_reason"
    [(kind, data)] = observer_events("turn", {"speaker_role": "caller", "text": "hi",
                                              "emotion": "calm", "valence": 0.2}, context)
    assert (kind, data) == ("user_transcript", {"transcript": "hi", "emotion_label": "calm",
                                                "emotion_valence": 0.2})
    out = observer_events("turn", {"speaker_role": "agent", "text": "Hello", "interrupted": False,
                                   "engine_ms": 40, "nav_ms": 12, "render_ms": 30,
                                   "audio_ttfb_ms": 70}, context)
    assert [k for k, _ in out] == ["agent_transcript", "nav_timing", "latency"]
    assert out[0][1] == {"transcript": "Hello", "action": "collect_reason", "interrupted": False}
    assert out[1][1]["total_ms"] == 42 and out[1][1]["state"] == "collect_reason"
    assert out[1][1]["model"] == "rules"
    assert out[2][1] == {"e2e_ttfb_ms": 70, "engine_ms": 40, "nav_ms": 12, "render_ms": 30,
                         "audio_ttfb_ms": 70, "continuation": False}
    greeting = observer_events("turn", {"speaker_role": "agent", "text": "Hi", "render_ms": 0},
                               context)
    assert [k for k, _ in greeting] == ["agent_transcript"]
    assert context.turns == 3


def test_transitions_tools_escalations_emotion_and_the_end():
    context = ctx()
    [(kind, data)] = observer_events("transition", {"previous_state": "greeting",
                                                    "next_state": "booking", "reason": "intent"},
                                     context)
    assert kind == "state_transition" and data["next_state"] == "booking"
    assert context.state == "booking"
    [(kind, data)] = observer_events("tool_started", {"name": "find_slots", "input": {"d": 1},
                                                      "tool_call_id": "t1"}, context)
    assert (kind, data) == ("tool_call_started", {"tool_name": "find_slots", "call_id": "t1",
                                                  "input": {"d": 1}})
    [(kind, data)] = observer_events("tool_call", {
        "name": "find_slots", "tool_call_id": "t1", "output": "x" * 5000, "duration_ms": 9,
        "error_class": "pms", "error_message": "down"}, context)
    assert kind == "tool_call_completed"
    assert len(data["output"]) == TOOL_OUTPUT_CHARS + 1 and data["succeeded"] is False
    assert data["error_message"] == "down"
    [(kind, data)] = observer_events("event", {"type": "escalation", "data": {
        "concept": "self_harm", "severity": "hard", "similarity": 0.9, "judge": None,
        "reason": "r"}}, context)
    assert kind == "escalation" and data["severity"] == "hard"
    [(kind, data)] = observer_events("event", {"type": "emotion", "data": {
        "dominant": "anger", "valence": -0.5, "arousal": 0.8, "source": "text"}}, context)
    assert (kind, data) == ("emotion", {"dominant": "anger", "valence": -0.5, "arousal": 0.8})
    [(kind, data)] = observer_events("event", {"type": "call_ended",
                                               "data": {"reason": "agent_hangup"},
                                               "at_ms": 61500}, context)
    assert kind == "session_end"
    assert data == {"call_sid": "CA1", "duration_s": 61.5, "turns": 0,
                    "completion_reason": "agent_hangup", "final_state": "booking"}
    assert observer_events("event", {"type": "guidance", "data": {}}, context) == []
    assert observer_events("update", {}, context) == []


def test_an_event_survives_json():
    event = ObserverEvent("c1", "w1", 7, "user_transcript", {"transcript": "hi"}, ts=1.5)
    assert ObserverEvent.from_json(event.to_json()) == event
    assert event.message() == {"type": "user_transcript", "call_id": "c1", "seq": 7, "ts": 1.5,
                               "data": {"transcript": "hi"}}


async def test_a_call_log_numbers_its_events_from_one_and_keeps_the_registry_current():
    bus = InProcessBus("pod", replay_events=100, queue_events=100)
    registry = LocalRegistry("pod")
    registry.add(ActiveCall("c1", "w1", "s1", "pod", 0.0))
    feed = CallFeed(ctx(), bus, registry)
    log = CallLog("c1", CollectingWriter(), observe=feed)
    log.event("call_started", mode="text")
    log.transition("greeting", "booking", "intent")
    tool_id = log.tool_started("find_slots", {"day": "mon"})
    log.tool_call("find_slots", {"day": "mon"}, "ok", started_ms=0, duration_ms=3,
                  tool_call_id=tool_id)
    log.turn(speaker_id="agent", speaker_role="agent", text="Hi", engine_ms=5,
             audio_ttfb_ms=9)
    log.event("emotion", dominant="joy", valence=0.6, arousal=0.3, source="text")
    log.event("guidance", text="not for observers")
    log.event("call_ended", reason="agent_hangup")
    events = await bus.replay("c1")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events] == [
        "session_start", "state_transition", "tool_call_started", "tool_call_completed",
        "agent_transcript", "latency", "emotion", "session_end"]
    assert events[2].data["call_id"] == events[3].data["call_id"] == tool_id
    entry = registry.local["c1"]
    assert entry.state == "booking" and entry.emotion["dominant"] == "joy"
    assert entry.latency["engine_ms"] == 5


def test_a_failing_bus_never_reaches_the_call():
    class Broken(InProcessBus):
        def publish(self, event):
            raise RuntimeError("boom")

    log = CallLog("c1", CollectingWriter(),
                  observe=CallFeed(ctx(), Broken("p", replay_events=1, queue_events=10),
                                   LocalRegistry("p")))
    log.event("call_started", mode="text")  # no exception
    log.event("call_ended", reason="agent_hangup")
