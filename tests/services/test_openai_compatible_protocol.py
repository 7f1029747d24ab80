"""Any OpenAI-compatible server (llama.cpp, Ollama, vLLM) as the engage LLM, via OPENAI_BASE_URL.

A local fake of the chat-completions streaming protocol (`data:` chunks, then
`[DONE]`) stands in for the server; no key is needed for a local one.
"""

import json

import pytest
from aiohttp import web
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from config import Settings
from services.providers import ProviderPlan, build_llm
from tests.local_http import event_stream, serve_http

pytestmark = pytest.mark.timeout(20)

REPLY = ["Sure, ", "which day ", "suits you?"]


class FakeChatCompletions:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.base_url = ""

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"body": body, "auth": request.headers.get("Authorization")})
        pieces = [{"role": "assistant", "content": ""}] + [{"content": p} for p in REPLY]
        chunks = [
            {
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta,
                             "finish_reason": "stop" if index == len(pieces) else None}],
            }
            for index, delta in enumerate(pieces + [{}])
        ]
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        return await event_stream(request, [*events, b"data: [DONE]\n\n"])


@pytest.fixture
async def server():
    fake = FakeChatCompletions()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.create)
    async with serve_http(app) as base_url:
        fake.base_url = f"{base_url}/v1"
        yield fake


async def test_a_local_openai_compatible_server_answers_the_caller(server):
    settings = Settings(_env_file=None, openai_base_url=server.base_url, openai_model="llama-3.1-8b")
    plan = ProviderPlan.from_settings(settings)
    llm = build_llm(plan, settings, "You are the scheduling assistant of Riverside Clinic.")
    context = LLMContext(messages=[{"role": "user", "content": "I need an appointment."}])

    down, _ = await run_test(llm, frames_to_send=[LLMContextFrame(context=context)])

    assert plan.llm.provider == "openai"
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "".join(REPLY)
    [request] = server.requests
    assert request["body"]["model"] == "llama-3.1-8b" and request["body"]["stream"] is True
    assert request["body"]["messages"][0]["role"] == "system"
    assert "Riverside Clinic" in request["body"]["messages"][0]["content"]
