"""An agitated caller by voice, against the real server: how the agent adapts shows in
the call record, and the same call with every emotion provider failing still completes.

The caller starts calm, then speaks fast, loud and high-pitched with frustrated words
(scenarios/agitated_caller.yaml). Offline, the voice's arousal is measured from the
signal and the words (recognised by PocketSphinx) name the feeling.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from aiohttp import web

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import load_script, simulate_call
from tests.e2e.conftest import RunningServer, another_server
from tests.local_http import serve_http

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "agitated_caller.yaml"


def events(record: dict, kind: str) -> list[dict]:
    return [e["data"] for e in record["events"] if e["type"] == kind]


async def call(server: RunningServer, script):
    return await simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=False, log=lambda *_: None,
    )


async def test_an_agitated_caller_changes_the_agents_steering_tone_and_fillers(server):
    script = load_script(SCENARIO)
    result = await call(server, script)
    record = result.record
    transcript = " | ".join(f"{t['speaker_role']}: {t['text']}" for t in record["turns"])

    assert script.expect.failures(result.to_json_dict()) == [], transcript
    # Calm at first: nothing to steer by yet, the workspace's neutral voice.
    assert events(record, "tone")[0]["tone"] == "neutral"
    # Then frustration: the words name it, the voice is loud and fast.
    steering = events(record, "steering")
    assert steering and "De-escalate" in steering[0]["text"]
    assert steering[0]["dominant"] in ("Annoyance", "Anger", "Distress")
    calm, *agitated = [t for t in record["turns"] if t["speaker_role"] == "caller"][:3]
    assert calm["emotion"] is None  # a plain request carries no emotion
    assert all(t["emotion"] and t["valence"] < -0.3 for t in agitated)
    assert max(t["arousal"] for t in agitated) > 0.5  # loud, fast and high
    agents = [t for t in record["turns"] if t["speaker_role"] == "agent" and t["tone"]]
    assert agents[-1]["tone"] == "calm"
    assert {f["register"] for f in events(record, "filler")} == {"suppressed"}
    summary = record["emotional_summary"]
    assert summary["provider_health"] == {"audio": "closed", "text": "closed"}
    assert summary["trajectory"] and summary["dominant_counts"]
    assert record["config_snapshot"]["providers"]["emotion_audio"] == "local"


@pytest.fixture(scope="module")
async def failing_emotion_server(server, db, tmp_path_factory):
    """The service with Hume unreachable and a fast model that answers nonsense."""

    async def junk(_request: web.Request) -> web.Response:
        return web.json_response({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "The caller is upset, probably."}]}, "finishReason": "STOP"}]})

    app = web.Application()
    app.router.add_post("/v1beta/models/{model_and_method}", junk)
    async with serve_http(app) as model_url, another_server(server, db, tmp_path_factory,
                                                            "failing-emotion", {
        "HUME_API_KEY": "hume-test-key",
        "HUME_BASE_URL": "ws://127.0.0.1:9",  # nothing listens there
        "GOOGLE_API_KEY": "g-test-key",
        "GOOGLE_BASE_URL": model_url,
        "NAVIGATOR_PROVIDER": "deterministic",
    }) as failing:
        yield failing


async def test_the_same_call_with_every_emotion_provider_failing_completes_normally(
    failing_emotion_server, db
):
    script = load_script(SCENARIO).model_copy(update={"from_number": "+15550100203"})
    result = await call(failing_emotion_server, script)
    record = result.record
    transcript = " | ".join(f"{t['speaker_role']}: {t['text']}" for t in record["turns"])

    # Completes normally: every caller turn answered, the agent ends it after the goodbye,
    # and whatever the caller booked is booked (the offline recogniser decides whether
    # this run's words amounted to a booking: that is not the emotion layer's doing).
    assert record["completion_reason"] == "agent_hangup", transcript
    roles = [t["speaker_role"] for t in record["turns"]]
    assert roles.count("caller") == 5 and roles[-1] == "agent", transcript
    booked = [t["succeeded"] for t in record["tool_calls"] if t["name"] == "CreateAppointment"]
    assert all(booked), transcript
    assert await db.pool.fetchval(
        "SELECT count(*) FROM appointments WHERE created_by_call = $1", uuid.UUID(result.call_id)
    ) == len(booked)
    health = {(e["channel"], e["state"]) for e in events(record, "emotion_provider")}
    assert ("audio", "disabled") in health and ("text", "open") in health
    assert record["config_snapshot"]["providers"]["emotion_audio"] == "hume"
    assert not events(record, "steering")  # nothing heard: the base instruction
    assert record["emotional_summary"]["provider_health"]["audio"] == "disabled"
    log = failing_emotion_server.log()
    assert "hume-test-key" not in log and "g-test-key" not in log
