"""The observer layers in whole calls against the real server (text sessions): a goodbye
ends the call within seconds, a silent caller is checked on three times and let go."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import load_script, simulate_call
from tests.e2e.conftest import RunningServer, another_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


async def call(server: RunningServer, name: str):
    script = load_script(SCENARIOS / name)
    result = await simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=True, log=lambda *_: None,
    )
    return script, result


def events(record: dict, kind: str) -> list[dict]:
    return [e for e in record["events"] if e["type"] == kind]


async def test_a_caller_who_says_goodbye_is_let_go_within_five_seconds(server):
    script, result = await call(server, "caller_says_goodbye.yaml")
    record = result.record

    assert script.expect.failures(result.to_json_dict()) == []
    (scheduled,) = [e for e in events(record, "goodbye") if e["data"]["action"] == "scheduled"]
    (ended,) = events(record, "call_ended")
    assert ended["at_ms"] - scheduled["at_ms"] < 5000
    # The observers left their marks: guidance for the LLM, the director's analyses.
    assert events(record, "guidance") and events(record, "director")
    assert not any("[" in t["text"] for t in record["turns"] if t["speaker_role"] == "agent")


@pytest.fixture(scope="module")
async def impatient_server(server, db, tmp_path_factory):
    """A server that checks on silence after 1 s instead of 10, 20 and 40."""
    async with another_server(
        server, db, tmp_path_factory, "silence",
        {"SILENCE_CHECKINS_S": "1,1,1", "SILENCE_GOODBYE_AFTER_S": "1"},
    ) as running:
        yield running


async def test_a_silent_caller_hears_three_check_ins_then_a_goodbye(impatient_server):
    script, result = await call(impatient_server, "silent_caller.yaml")
    record = result.record

    assert script.expect.failures(result.to_json_dict()) == []
    assert record["completion_reason"] == "caller_silent"
    agent_lines = [t["text"] for t in record["turns"] if t["speaker_role"] == "agent"]
    assert agent_lines[-4:] == [
        "Are you still there?",
        "I'm still here whenever you're ready. Take your time.",
        "I haven't heard anything for a while. If you can hear me, just say something.",
        "I can't hear anyone on the line, so I'll end the call now. Please call us back "
        "whenever you need us. Goodbye.",
    ]
    assert result.ended_by == "agent"


async def test_a_caller_in_crisis_is_escalated_and_the_agent_suspended(server, db):
    script, result = await call(server, "caller_in_crisis.yaml")
    record = result.record

    assert script.expect.failures(result.to_json_dict()) == []
    rows = await db.pool.fetch(
        "SELECT concept, severity, status FROM escalations WHERE call_id = $1",
        uuid.UUID(result.call_id))
    assert [dict(r) for r in rows] == [
        {"concept": "suicidal_ideation", "severity": "hard", "status": "open"}]
    # After the holding line, nothing the agent says is generated.
    said = [t["text"] for t in record["turns"] if t["speaker_role"] == "agent"]
    holding = next(i for i, text in enumerate(said) if "bringing in a person" in text)
    assert all("A person from our team is joining" in text for text in said[holding + 1:])


async def test_a_caller_talking_over_the_greeting_takes_the_floor_by_voice(server):
    """Real speech through VAD and the semantic barge-in strategy: the caller's words
    (recognised only after they stop) come late, so a second of speech takes the floor."""
    script = load_script(SCENARIOS / "barge_in.yaml")
    result = await simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=False, log=lambda *_: None,
    )
    record = result.record

    # The first barge-in is the caller over the greeting. (A second one sometimes follows
    # within the same line: its cause is still under investigation.)
    barge_in = [e["data"] for e in events(record, "barge_in")][0]
    assert barge_in["how"] == "sustained_speech" and barge_in["speech_s"] >= 1.0
    assert barge_in["count"] == 1
    greeting = record["turns"][0]
    assert greeting["speaker_role"] == "agent" and greeting["interrupted"]
    assert events(record, "interruption_context")
    assert record["completion_reason"] == "agent_hangup"
