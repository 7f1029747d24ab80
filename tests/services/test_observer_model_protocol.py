"""The director, the safety judge and the cloud embedder against local fakes of Gemini,
Anthropic and OpenAI's APIs: the schema goes with the request, the answer is checked,
junk and slowness fail (and mean no guidance, or no verdict)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from aiohttp import web

from call.conversation_tracker import ConversationTracker
from config import Settings
from pipeline.providers import ProviderPlan, build_director, build_safety
from processors.conversation.director import DirectorView
from processors.conversation.quick_rules import quick_rules
from processors.safety.concepts import default_concepts
from services.embeddings import OpenAIEmbedder
from tests.local_http import serve_http
from tests.model_fakes import serve_anthropic, serve_gemini

pytestmark = pytest.mark.timeout(20)

ANALYSIS = {
    "analysis": {"call_phase": "main", "engagement_level": "high",
                 "current_topic": "booking", "emotional_tone": "concerned"},
    "direction": {"stay_or_shift": "stay", "next_topic": None, "pacing_note": "good"},
    "reminder": {"should_deliver": False, "which_reminder": None, "delivery_approach": None},
    "guidance": {"tone": "empathetic", "priority_action": "Reassure",
                 "specific_instruction": "Acknowledge the worry, then offer the earliest slot."},
    "model_recommendation": {"use_sonnet": False, "max_tokens": 180, "reason": "concern"},
}


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


def view(latest: str) -> DirectorView:
    tracker = ConversationTracker()
    tracker.caller_said("Hi, it's about my results.")
    tracker.agent_said("Of course. What would you like to do?")
    return DirectorView(clinic_name="Riverside Clinic", latest=latest,
                        observation=quick_rules().observe(latest), tracker=tracker,
                        elapsed_s=75.0)


async def test_gemini_directs_with_the_director_schema():
    async with serve_gemini([json.dumps(ANALYSIS)]) as (fake, base_url):
        values = {"google_api_key": "g-test", "google_base_url": base_url}
        director = build_director(ProviderPlan.from_settings(settings(**values)),
                                  settings(**values))
        analysis = await director.analyze(view("I'm worried, can I come in soon?"))

    assert director.name == "model" and analysis.guidance.tone == "empathetic"
    body = fake.requests[0]["body"]
    schema = body["generationConfig"]["responseJsonSchema"]
    assert schema["required"] == ["analysis", "direction", "reminder", "guidance",
                                  "model_recommendation"]
    prompt = body["contents"][-1]["parts"][0]["text"]
    assert "Riverside Clinic" in prompt and "1 min 15 s" in prompt
    assert "Caller (latest): \"I'm worried, can I come in soon?\"" in prompt


async def test_claude_directs_when_only_an_anthropic_key_is_set_and_junk_is_refused():
    async with serve_anthropic(["The caller seems fine."]) as (fake, base_url):
        values = {"anthropic_api_key": "sk-ant-test", "anthropic_base_url": base_url}
        director = build_director(ProviderPlan.from_settings(settings(**values)),
                                  settings(**values))
        with pytest.raises(ValueError, match="not JSON"):
            await director.analyze(view("Tuesday"))
    assert fake.requests[0]["body"]["model"] == "claude-haiku-4-5"


async def test_a_slow_director_times_out():
    async with serve_gemini([("slow", 2.0, json.dumps(ANALYSIS))]) as (_fake, base_url):
        values = {"google_api_key": "g", "google_base_url": base_url, "director_timeout_s": 0.3}
        director = build_director(ProviderPlan.from_settings(settings(**values)),
                                  settings(**values))
        with pytest.raises(TimeoutError):
            await director.analyze(view("Tuesday"))


def concept(key: str):
    return next(c for c in default_concepts() if c.key == key)


async def test_the_model_judge_says_no_to_a_figure_of_speech_and_refuses_junk():
    answers = [json.dumps({"confirmed": False, "reason": "figure of speech"}), "maybe?"]
    async with serve_gemini(answers) as (fake, base_url):
        values = {"google_api_key": "g-test", "google_base_url": base_url}
        judge = build_safety(ProviderPlan.from_settings(settings(**values)),
                             settings(**values)).judge
        verdict = await judge.judge("This wait is killing me", concept("suicidal_ideation"))
        with pytest.raises(ValueError):
            await judge.judge("This wait is killing me", concept("suicidal_ideation"))

    assert (verdict.confirmed, verdict.judge) == (False, "model")
    body = fake.requests[0]["body"]
    assert body["generationConfig"]["responseJsonSchema"]["required"] == ["confirmed", "reason"]
    prompt = body["contents"][-1]["parts"][0]["text"]
    assert "Suicidal ideation" in prompt and "This wait is killing me" in prompt


class FakeEmbeddings:
    """OpenAI's POST /v1/embeddings: one vector per input, in any order, with its index."""

    def __init__(self, dimension: int = 1536, delay_s: float = 0.0) -> None:
        self.dimension = dimension
        self.delay_s = delay_s
        self.requests: list[dict] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"headers": dict(request.headers), "body": body})
        await asyncio.sleep(self.delay_s)
        texts = body["input"]
        rows = [{"object": "embedding", "index": i,
                 "embedding": [float(len(t) + j % 7) for j in range(self.dimension)]}
                for i, t in enumerate(texts)]
        return web.json_response({"object": "list", "data": list(reversed(rows)),
                                  "model": body["model"],
                                  "usage": {"prompt_tokens": 8, "total_tokens": 8}})


async def serve_embeddings(fake: FakeEmbeddings):
    app = web.Application()
    app.router.add_post("/v1/embeddings", fake.handle)
    return serve_http(app)


async def test_openai_embeds_with_text_embedding_3_small_and_unit_vectors():
    fake = FakeEmbeddings()
    async with await serve_embeddings(fake) as base_url:
        values = {"openai_api_key": "sk-test", "openai_base_url": f"{base_url}/v1"}
        embedder = build_safety(ProviderPlan.from_settings(settings(**values)),
                                settings(**values)).embedder
        vectors = await embedder.embed(["short", "a longer sentence"])

    assert isinstance(embedder, OpenAIEmbedder) and vectors.shape == (2, 1536)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])  # rows back in input order
    request = fake.requests[0]
    assert request["body"]["model"] == "text-embedding-3-small"
    assert request["headers"]["Authorization"] == "Bearer sk-test"


async def test_openai_embeddings_of_the_wrong_size_or_too_late_fail():
    async with await serve_embeddings(FakeEmbeddings(dimension=8)) as base_url:
        with pytest.raises(ValueError, match="shape"):
            await OpenAIEmbedder("k", base_url=f"{base_url}/v1").embed(["x"])
    async with await serve_embeddings(FakeEmbeddings(delay_s=2)) as base_url:
        with pytest.raises(Exception):  # noqa: B017 - a timeout, however the SDK names it
            await OpenAIEmbedder("k", base_url=f"{base_url}/v1", timeout_s=0.3).embed(["x"])
