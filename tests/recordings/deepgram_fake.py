"""A local fake of Deepgram's pre-recorded API (`POST /v1/listen`, multichannel), as its
documentation describes it: `Authorization: Token <key>`, the audio as the body with its
content type, query parameters for the model and features, and a JSON response with
`metadata` and `results.channels[i].alternatives[0].words[]` (`word`, `start`, `end`,
`confidence`, `punctuated_word`) plus `results.utterances` when `utterances=true`.
`keyterm` may repeat (one per term, nova-3's keyterm prompting): each request keeps them
all, in order."""

from __future__ import annotations

import asyncio
import io
import wave
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from tests.local_http import serve_http


def channel_result(transcript: str, start_s: float) -> dict:
    words = [
        {"word": w.lower().strip(".,?"), "start": round(start_s + 0.4 * i, 3),
         "end": round(start_s + 0.4 * i + 0.3, 3), "confidence": 0.98, "punctuated_word": w}
        for i, w in enumerate(transcript.split())
    ]
    return {"alternatives": [{"transcript": transcript, "confidence": 0.98, "words": words}]}


@dataclass
class FakeDeepgramPrerecorded:
    """Answers each request with the next answer: "ok" (the channel transcripts), an int
    (that HTTP status, Deepgram's error body) or ("slow", seconds)."""

    transcripts: list[tuple[str, float]]  # per channel: text and its first word's start
    answers: list = field(default_factory=lambda: ["ok"])
    requests: list[dict] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with wave.open(io.BytesIO(body)) as wav:
            channels, seconds = wav.getnchannels(), wav.getnframes() / wav.getframerate()
        self.requests.append({"path": request.path, "query": dict(request.query),
                              "keyterms": request.query.getall("keyterm", []),
                              "headers": dict(request.headers), "bytes": len(body),
                              "channels": channels})
        answer = self.answers.pop(0) if self.answers else "ok"
        if isinstance(answer, int):
            return web.json_response({"err_code": "INVALID_AUTH", "err_msg": "refused",
                                      "request_id": "0"}, status=answer)
        if isinstance(answer, tuple):
            await asyncio.sleep(answer[1])
        results: dict = {"channels": [channel_result(*self.transcripts[i]) if i < len(
            self.transcripts) else {"alternatives": []} for i in range(channels)]}
        if request.query.get("utterances") == "true":
            results["utterances"] = [
                {"start": start, "end": start + 0.4 * len(text.split()), "channel": i,
                 "transcript": text, "confidence": 0.98}
                for i, (text, start) in enumerate(self.transcripts)
            ]
        return web.json_response({
            "metadata": {"request_id": "5d5f2b3c-0000-4000-8000-000000000001",
                         "duration": seconds, "channels": channels,
                         "models": ["1dbdfb4d-85b2-4659-9db6-cdd5a3d1ef0f"]},
            "results": results,
        })


@asynccontextmanager
async def serve_deepgram(transcripts: list[tuple[str, float]],
                         answers: list | None = None) -> AsyncIterator[FakeDeepgramPrerecorded]:
    fake = FakeDeepgramPrerecorded(transcripts, answers or ["ok"])
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/listen", fake.handle)
    async with serve_http(app) as fake.base_url:
        yield fake
