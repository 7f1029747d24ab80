"""Local fakes of the fast models' HTTP APIs (Gemini generateContent, Anthropic Messages,
non-streaming), as google-genai and anthropic speak them: for the navigator and the
emotion text provider, which both ask these models through Pipecat's `run_inference`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from tests.local_http import serve_http

Shape = Callable[[dict[str, Any], str], dict[str, Any]]


def gemini_response(_body: dict, text: str) -> dict:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 18,
                          "totalTokenCount": 138},
        "modelVersion": "gemini-2.5-flash",
    }


def anthropic_response(body: dict, text: str) -> dict:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 120, "output_tokens": 18},
    }


class FakeModelServer:
    """Answers each request with the next of `answers`, in the provider's response shape.

    An answer may be text, an int (that HTTP status, as the provider's error), or
    ("slow", seconds, text).
    """

    def __init__(self, shape: Shape, answers: list) -> None:
        self.shape = shape
        self.requests: list[dict] = []
        self.answers = list(answers)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path, "headers": dict(request.headers),
                              "body": await request.json()})
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            return web.json_response({"error": {"code": answer, "message": "refused"}},
                                     status=answer)
        if isinstance(answer, tuple):
            _, seconds, answer = answer
            await asyncio.sleep(seconds)
        return web.json_response(self.shape(self.requests[-1]["body"], answer))


@asynccontextmanager
async def _serve(shape: Shape, route: str, answers: list) -> AsyncIterator[tuple[FakeModelServer, str]]:
    fake = FakeModelServer(shape, answers)
    app = web.Application()
    app.router.add_post(route, fake.handle)
    async with serve_http(app) as base_url:
        yield fake, base_url


def serve_gemini(answers: list):
    """Gemini's generateContent on a local port: yields (fake, base URL)."""
    return _serve(gemini_response, "/v1beta/models/{model_and_method}", answers)


def serve_anthropic(answers: list):
    """Anthropic's Messages API on a local port: yields (fake, base URL)."""
    return _serve(anthropic_response, "/v1/messages", answers)
