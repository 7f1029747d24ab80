"""A whole call against the real server, driven by the simulator exactly as Twilio would."""

import struct
import wave
from pathlib import Path

import pytest

from services.dev_credentials import twilio_auth_token
from services.simulator import load_script, simulate_call

pytestmark = pytest.mark.e2e
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def channel_rms(path: str) -> tuple[float, float]:
    with wave.open(path) as wav:
        assert wav.getnchannels() == 2 and wav.getsampwidth() == 2
        samples = struct.unpack(f"<{wav.getnframes() * 2}h", wav.readframes(wav.getnframes()))
    left, right = samples[0::2], samples[1::2]
    return tuple((sum(s * s for s in ch) / max(1, len(ch))) ** 0.5 for ch in (left, right))


async def run(server, name: str, text_mode: bool):
    return await simulate_call(
        load_script(SCENARIOS / name), base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=text_mode, log=lambda *_: None,
    )


@pytest.mark.timeout(180)
async def test_an_audio_call_is_answered_recorded_and_ended_by_the_agent(server):
    result = await run(server, "greeting_callback.yaml", text_mode=False)
    record = result.record

    assert result.record["completion_reason"] == "agent_hangup"
    roles = [turn["speaker_role"] for turn in record["turns"]]
    assert roles == ["agent", "caller", "agent", "caller", "agent"]
    greeting, first_caller, offer, _, goodbye = record["turns"]
    assert "Demo Family Clinic" in greeting["text"]
    assert "appointment" in first_caller["text"]  # real speech, recognised by PocketSphinx
    assert "call you back" in offer["text"] and goodbye["text"].endswith("Goodbye.")
    # Five-layer timing: caller speech boundaries, agent latency and playback.
    assert first_caller["user_speech_start_ms"] < first_caller["user_speech_end_ms"]
    assert offer["audio_ttfb_ms"] is not None and offer["engine_ms"] is not None
    assert offer["agent_speech_start_ms"] > first_caller["user_speech_end_ms"]
    assert offer["agent_speech_end_ms"] > offer["agent_speech_start_ms"]
    assert "callback_requested" in [event["type"] for event in record["events"]]
    # Stereo recording: caller on the left, agent on the right, speech in both.
    left, right = channel_rms(record["recording_path"])
    assert left > 100 and right > 100


@pytest.mark.timeout(120)
async def test_a_text_call_follows_the_same_path_deterministically(server):
    result = await run(server, "greeting_callback.yaml", text_mode=True)
    turns = [(t["speaker_role"], t["text"]) for t in result.record["turns"]]
    assert result.record["completion_reason"] == "agent_hangup"
    assert turns[1] == ("caller", "Hi, I'd like to book an appointment with Doctor Patel next week.")
    assert [role for role, _ in turns] == ["agent", "caller", "agent", "caller", "agent"]
    assert result.record["recording_path"] is None
