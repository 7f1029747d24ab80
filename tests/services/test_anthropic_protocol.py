"""Claude through Pipecat's Anthropic service, against a local fake of the Messages API.

The fake speaks the documented streaming protocol (server-sent events:
message_start, content_block_start/delta/stop, message_delta, message_stop) and
its error shape. A rejected key must never mean silence: the fallback responder
takes the turn and the call record says why.
"""

import json

import pytest
from aiohttp import web
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from config import Settings
from db.call_backs import CallBacks
from pipeline.providers import ProviderPlan, build_llm
from processors.call_control.fallback_responder_processor import FallbackResponderProcessor
from tests.local_http import event_stream, serve_http

pytestmark = pytest.mark.timeout(20)

GOOD_KEY = "sk-ant-test-good"
REPLY = ["I can ", "help you ", "reschedule that."]


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropicMessages:
    """POST /v1/messages: a streamed text reply for the good key, 401 for any other."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.base_url = ""

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"body": body, "api_key": request.headers.get("x-api-key")})
        if request.headers.get("x-api-key") != GOOD_KEY:
            return web.json_response(
                {"type": "error",
                 "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
                status=401,
            )
        usage = {"input_tokens": 30, "output_tokens": 1}
        return await event_stream(request, [
            sse("message_start", {"type": "message_start", "message": {
                "id": "msg_01", "type": "message", "role": "assistant", "content": [],
                "model": body["model"], "stop_reason": None, "stop_sequence": None,
                "usage": usage,
            }}),
            sse("content_block_start", {
                "type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""},
            }),
            sse("ping", {"type": "ping"}),
            *(
                sse("content_block_delta", {
                    "type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                })
                for piece in REPLY
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            }),
            sse("message_stop", {"type": "message_stop"}),
        ])


@pytest.fixture
async def anthropic():
    fake = FakeAnthropicMessages()
    app = web.Application()
    app.router.add_post("/v1/messages", fake.create)
    async with serve_http(app) as fake.base_url:
        yield fake



def claude(anthropic, key: str):
    settings = Settings(_env_file=None, anthropic_api_key=key, anthropic_base_url=anthropic.base_url)
    plan = ProviderPlan.from_settings(settings)
    assert plan.llm.provider == "anthropic"
    return build_llm(plan, settings, "You are the scheduling assistant of Riverside Clinic.")


def caller_says(text: str) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]))


async def test_claude_streams_its_reply_through_the_pipeline(anthropic, session):
    llm = claude(anthropic, GOOD_KEY)
    pipeline = Pipeline([FallbackResponderProcessor(session, llm_available=True), llm])

    down, _ = await run_test(pipeline, frames_to_send=[caller_says("Can I move my appointment?")])

    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "".join(REPLY)
    [request] = anthropic.requests
    assert request["body"]["model"] == "claude-sonnet-4-6" and request["body"]["stream"] is True
    assert "Riverside Clinic" in json.dumps(request["body"]["system"])
    last = request["body"]["messages"][-1]
    assert last["role"] == "user" and "Can I move my appointment?" in json.dumps(last["content"])


async def test_a_rejected_key_hands_the_caller_to_the_fallback_not_to_silence(
    anthropic, session, writer
):
    llm = claude(anthropic, "sk-ant-revoked")
    offerable = CallBacks(None, lambda: None)  # a call back can be offered on this call
    pipeline = Pipeline([FallbackResponderProcessor(session, llm_available=True,
                                                    call_backs=offerable), llm])

    down, _ = await run_test(pipeline, frames_to_send=[caller_says("Can I move my appointment?")])

    spoken = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert "call you back" in spoken
    assert [e.data["reason"] for e in writer.events("llm_unavailable")] == ["llm error"]
