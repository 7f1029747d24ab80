"""After the call, end to end: a patient who calls again the same day hears what they did
on their first call, from the first call's analysis, written by its durable job."""

import pytest

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import CallScript, simulate_call

pytestmark = pytest.mark.e2e
MARGARET = "+15550100201"  # Margaret Chen in the demo clinic
CLINIC = "+15550100100"


async def call(server, script: CallScript, *, text_mode: bool):
    return await simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=text_mode,
        log=lambda *_: None)


def script(*lines: str) -> CallScript:
    return CallScript.model_validate({"from": MARGARET, "to": CLINIC,
                                      "turns": [{"say": line} for line in lines]})


@pytest.mark.timeout(300)
async def test_a_patient_calling_again_today_hears_what_they_did_on_their_first_call(server):
    first = await call(server, script("Hi, I need to book a physio session.",
                                      "Sometime next week in the afternoon.",
                                      "The second one please.", "Yes, that's right.",
                                      "That's everything, bye."), text_mode=True)
    analysis = first.record["analysis"]  # the simulator waited for the first call's job
    [booked] = [item for item in analysis["summary"]["done"] if item["kind"] == "booked"]
    assert booked["recap"].startswith("booked Physiotherapy")

    second = await call(server, script("Hello, it's me again.",
                                       "What time do you close on Friday?",
                                       "Thanks, bye."), text_mode=False)

    agent = [t["text"] for t in second.record["turns"] if t["speaker_role"] == "agent"]
    [welcome] = [line for line in agent if "Earlier today you" in line]
    assert welcome.startswith("Welcome back, Margaret. Earlier today you booked Physiotherapy")
    assert agent.index(welcome) == 1  # the first reply to the caller, after the greeting
    assert sum("Welcome back" in line for line in agent) == 1  # said once
    assert 1 <= second.record["analysis"]["quality_score"] <= 5  # the second is analysed too
