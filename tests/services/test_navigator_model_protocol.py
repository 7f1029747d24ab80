"""The LLM navigator's fast model through Pipecat's services, against local protocol fakes.

Gemini Flash (generateContent, the REST shape google-genai speaks) with a Google key,
Claude Haiku (the Messages API, non-streaming) with only an Anthropic key. Both are
asked for the navigator's JSON schema; a junk first answer is retried, and the first
filler is said while the model is asked again.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from call.call_session import CallLog
from call.identity import CallIdentity
from config import Settings
from db.scheduling import Patient
from flows.graph import bundled_graph
from flows.graph_session import GraphSession
from flows.llm_navigator import LLMNavigator
from pipeline.providers import ProviderPlan, build_navigator_model
from tests.fakes import CollectingWriter
from tests.model_fakes import serve_anthropic, serve_gemini

pytestmark = pytest.mark.timeout(20)

GRAPH = bundled_graph("clinic_booking")
PRIYA = Patient("p-priya", "Priya", "Nair", date(1985, 9, 30), "+15550100204")
ANSWERS = [
    "Sure! The caller seems to want help.",  # not JSON: retried
    json.dumps({"choice": "ask_how_can_help", "filler": "Of course.", "verify_audio": False}),
]


async def navigate_with(settings: Settings) -> tuple[object, list[str], CollectingWriter]:
    plan = ProviderPlan.from_settings(settings)
    model = build_navigator_model(plan, settings)
    writer = CollectingWriter()
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA,
                             phone_matches=[PRIYA], upcoming=[], services_read=True)
    navigator = LLMNavigator(GRAPH, model, CallLog("c", writer), clinic_name="Demo Family Clinic")
    decision = await navigator.navigate(
        session, "booking_discovery", "hmm, hello?", date(2026, 11, 24), filler=say
    )
    return decision, said, writer


async def test_gemini_flash_navigates_with_the_schema_and_recovers_from_junk():
    async with serve_gemini(ANSWERS) as (fake, base_url):
        settings = Settings(_env_file=None, google_api_key="g-test", google_base_url=base_url)
        decision, said, writer = await navigate_with(settings)

    assert (decision.state, decision.action) == ("booking_discovery", "ask_how_can_help")
    assert said == ["Of course."]
    assert [e.data["attempt"] for e in writer.events("navigator_retry")] == [1]
    first = fake.requests[0]
    assert first["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert first["headers"]["x-goog-api-key"] == "g-test"
    config = first["body"]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["required"] == ["choice", "filler", "verify_audio"]
    prompt = first["body"]["contents"][-1]["parts"][0]["text"]
    assert "ask_how_can_help" in prompt and "hmm, hello?" in prompt
    assert "never speak to the caller" in json.dumps(first["body"]["systemInstruction"])


async def test_claude_haiku_navigates_when_only_an_anthropic_key_is_set():
    async with serve_anthropic(ANSWERS) as (fake, base_url):
        settings = Settings(_env_file=None, anthropic_api_key="sk-ant-test",
                            anthropic_base_url=base_url)
        decision, said, _ = await navigate_with(settings)

    assert decision.action == "ask_how_can_help" and said == ["Of course."]
    body = fake.requests[0]["body"]
    assert body["model"] == "claude-haiku-4-5" and body["stream"] is False
    assert body["max_tokens"] == 120
    schema = body["output_config"]["format"]["schema"]
    assert schema["properties"]["choice"] == {"type": "string"}
