"""Text mode end to end over Pipecat's real eval transport, RTVI processor and observer."""

from __future__ import annotations

import pytest

from simulator.simulator import AgentTextTracker, CallScript, simulate_call
from tests.simulator.conftest import API_KEY, TOKEN
from tests.simulator.fake_service import GREETING


def script(*lines: str, **extra) -> CallScript:
    return CallScript.model_validate({
        "from": "+15550100123", "to": "+15550100100",
        "turns": [{"say": line, "pause_s": 0.1} for line in lines], **extra,
    })


async def text_call(url: str, the_script: CallScript):
    """A typed call with the simulator's defaults."""
    return await simulate_call(
        the_script, base_url=url, api_key=API_KEY, twilio_token=TOKEN, text_mode=True,
        log=lambda _line: None,
    )


@pytest.mark.timeout(30)
async def test_a_typed_conversation_gets_each_agent_reply_exactly_once(fake_service):
    service, url = fake_service()

    result = await text_call(url, script("I'd like to book a checkup", "goodbye"))

    said = [(u.text, u.source) for u in result.agent_utterances]
    assert said == [
        (GREETING, "bot-output"),
        ("You said: I'd like to book a checkup", "bot-llm-text"),
        ("Goodbye.", "bot-llm-text"),
    ]
    assert result.ended_by == "agent"
    assert result.to_json_dict()["completion_reason"] == "agent_hangup"
    assert [t["speaker_role"] for t in result.to_json_dict()["turns"]] == [
        "agent", "caller", "agent", "caller", "agent",
    ]
    (status,) = service.only_call.status_forms
    assert status["CallStatus"] == "completed"


@pytest.mark.timeout(30)
async def test_the_caller_ends_a_text_call_when_its_lines_run_out(fake_service):
    _, url = fake_service()

    result = await text_call(url, script("Can I get a flu shot?"))

    assert result.ended_by == "caller"
    assert result.agent_utterances[-1].text == "You said: Can I get a flu shot?"
    assert result.to_json_dict()["completion_reason"] == "caller_disconnected"
    kinds = [event.kind for event in result.client_log]
    assert "bot_ready" in kinds and kinds[-1] == "caller_hangup"


@pytest.mark.timeout(30)
async def test_a_greeting_whose_text_is_held_back_still_comes_before_the_first_line(fake_service):
    _, url = fake_service(greeting_text_skips_tts=False)

    result = await text_call(url, script("hello", hangup_after_s=0.5))

    kinds = [event.kind for event in result.client_log]
    assert [u.text for u in result.agent_utterances] == ["You said: hello"]
    assert kinds[:2] == ["bot_ready", "caller_line"]
    ready, first_line = (e.at_s for e in result.client_log[:2])
    assert first_line - ready >= 0.75 + 0.1 - 0.05  # the quiet after the greeting, the pause


def rtvi(kind: str, **data) -> dict:
    return {"label": "rtvi-ai", "type": kind, **({"data": data} if data else {})}


@pytest.mark.timeout(10)
def test_a_greeting_without_text_still_counts_as_the_agents_turn():
    tracker = AgentTextTracker()
    tracker.handle(rtvi("bot-tts-started"), now=0.1)
    tracker.handle(rtvi("bot-tts-stopped"), now=0.2)

    assert not tracker.turn_finished(since=0.0, now=0.5, quiet_s=0.75)
    assert tracker.turn_finished(since=0.0, now=0.95, quiet_s=0.75)
    assert tracker.utterances == []


@pytest.mark.timeout(10)
def test_the_turn_stays_open_while_a_tool_call_runs():
    tracker = AgentTextTracker()
    tracker.handle(rtvi("bot-llm-started"), now=1.0)
    tracker.handle(rtvi("llm-function-call-in-progress", tool_call_id="t1"), now=1.1)
    tracker.handle(rtvi("bot-llm-stopped"), now=1.2)

    assert not tracker.turn_finished(since=0.0, now=5.0, quiet_s=0.75)
    tracker.handle(rtvi("llm-function-call-stopped", tool_call_id="t1", cancelled=False), now=5.0)
    assert tracker.turn_finished(since=0.0, now=5.8, quiet_s=0.75)


@pytest.mark.timeout(10)
def test_bot_output_adds_only_speech_the_llm_did_not_already_report():
    tracker = AgentTextTracker()
    tracker.handle(rtvi("bot-output", text="Welcome to the clinic.", output_type="sentence",
                        segment_id=1, spoken_status="new"), now=0.1)
    tracker.handle(rtvi("bot-llm-started"), now=1.0)
    for chunk in ["Sure,", " which", " day?"]:
        tracker.handle(rtvi("bot-llm-text", text=chunk), now=1.1)
    tracker.handle(rtvi("bot-llm-stopped"), now=1.2)
    tracker.handle(rtvi("bot-output", text="Sure, which day?", output_type="sentence",
                        segment_id=2, spoken_status="new"), now=1.3)
    tracker.handle(rtvi("bot-output", text="Welcome to the clinic.", output_type="sentence",
                        segment_id=1, spoken_status="completed"), now=1.4)

    assert [(u.text, u.source) for u in tracker.utterances] == [
        ("Welcome to the clinic.", "bot-output"),
        ("Sure, which day?", "bot-llm-text"),
    ]


@pytest.mark.timeout(10)
def test_the_agent_is_mid_turn_until_its_reply_has_gone_quiet():
    tracker = AgentTextTracker()
    tracker.handle(rtvi("bot-llm-started"), now=1.0)

    assert tracker.mid_turn(now=9.0, quiet_s=0.75)
    tracker.handle(rtvi("bot-llm-text", text="One moment."), now=1.1)
    tracker.handle(rtvi("bot-llm-stopped"), now=1.2)
    assert tracker.mid_turn(now=1.5, quiet_s=0.75)
    assert not tracker.mid_turn(now=2.0, quiet_s=0.75)
