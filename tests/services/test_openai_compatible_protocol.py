"""Any OpenAI-compatible server (llama.cpp, Ollama, vLLM) as the engage LLM, via OPENAI_BASE_URL.

A local fake of the chat-completions streaming protocol (tests/fake_chat.py) stands
in for the server; no key is needed for a local one.
"""

import pytest
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from config import Settings
from pipeline.providers import ProviderPlan, build_llm
from tests.fake_chat import Say, serve_chat

pytestmark = pytest.mark.timeout(20)

REPLY = ["Sure, ", "which day ", "suits you?"]


@pytest.fixture
async def server():
    async with serve_chat(lambda _body: Say("".join(REPLY))) as fake:
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
