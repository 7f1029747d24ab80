"""A local OpenAI-compatible chat-completions server (the protocol llama.cpp, vLLM and
Ollama serve), scripted per request: it streams either text or one tool call.

It follows the documented streaming shape: `chat.completion.chunk` objects as `data:`
events, the first delta carrying the role, tool calls as `tool_calls` deltas whose
`arguments` arrive in pieces, a final chunk with `finish_reason` (`stop` or
`tool_calls`), then `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.local_http import event_stream, serve_http


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class CallTool:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Reply = Say | CallTool
Script = Callable[[dict[str, Any]], Reply]


def chunks(model: str, reply: Reply, call_id: str = "call_1") -> list[dict[str, Any]]:
    """The streamed chunks of one reply (`call_id`: the tool call's unique id)."""
    if isinstance(reply, Say):
        words = reply.text.split(" ")
        pieces = [{"content": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words)]
        deltas, finish = [{"role": "assistant", "content": ""}, *pieces], "stop"
    else:
        arguments = json.dumps(reply.arguments)
        half = len(arguments) // 2
        deltas = [
            {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": call_id, "type": "function",
                "function": {"name": reply.name, "arguments": ""},
            }]},
            {"tool_calls": [{"index": 0, "function": {"arguments": arguments[:half]}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]},
        ]
        finish = "tool_calls"
    return [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000,
         "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in deltas
    ] + [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000,
          "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]


class FakeChatCompletions:
    """POST /v1/chat/completions, answered by `script(request body)`; requests are kept."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"body": body, "auth": request.headers.get("Authorization")})
        call_id = f"call_{len(self.requests)}"
        events = [f"data: {json.dumps(c)}\n\n".encode()
                  for c in chunks(body["model"], self.script(body), call_id)]
        return await event_stream(request, [*events, b"data: [DONE]\n\n"])


@asynccontextmanager
async def serve_chat(script: Script) -> AsyncIterator[FakeChatCompletions]:
    """The fake on a free loopback port; `base_url` ends in /v1 as clients expect."""
    fake = FakeChatCompletions(script)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.create)
    async with serve_http(app) as base_url:
        fake.base_url = f"{base_url}/v1"
        yield fake
