"""A stand-in for the voice service that speaks the same protocols as the real one.

Signed Twilio webhooks (checked with Twilio's own RequestValidator), a Twilio
media stream with a fake agent that plays a tone in real time, a text session on
Pipecat's real eval transport with a deterministic echo LLM, and the call-record
API. It records everything it receives so tests can check the simulator behaves
like Twilio, and it never trusts the simulator's own code to do so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Request, Response, WebSocket
from pipecat.evals.fastapi_transport import EvalFastAPIWebsocketTransport
from pipecat.evals.serializer import EvalSerializer, parse_eval_connect
from pipecat.evals.transport import EvalTransportParams
from pipecat.frames.frames import (
    EndWorkerFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.utils.text.base_text_aggregator import TextType
from pipecat.workers.runner import WorkerRunner
from starlette.websockets import WebSocketDisconnect
from twilio.request_validator import RequestValidator
from twilio.twiml.voice_response import Connect, Stream, VoiceResponse

CHUNK_S = 0.04  # Pipecat's output transport sends 40 ms per media message
ULAW_SILENT_CODES = {0xFF, 0x7F}  # μ-law codes of a zero sample
CALLER_END_OF_SPEECH_S = 0.3
GREETING = "Thanks for calling the clinic."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Run `app` under uvicorn on a free local port, in its own thread and event loop."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name=f"fake-service-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake service did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def tone_ulaw(seconds: float) -> bytes:
    """A 440 Hz tone as μ-law, built with the textbook G.711 formula (not the simulator's)."""
    out = bytearray()
    for i in range(int(seconds * 8000)):
        sample = int(8000 * math.sin(2 * math.pi * 440 * i / 8000))
        sign = 0x80 if sample < 0 else 0
        magnitude = min(abs(sample), 32635) + 0x84
        exponent = max(0, magnitude.bit_length() - 8)
        mantissa = (magnitude >> (exponent + 3)) & 0x0F
        out.append(~(sign | (exponent << 4) | mantissa) & 0xFF)
    return bytes(out)


@dataclass
class FakeAgent:
    """How the fake agent behaves on a phone call."""

    greeting_s: float = 1.0
    reply_s: float = 0.8
    clear_on_barge_in: bool = True
    hang_up_after_reply: int | None = None
    greeting_mark: str | None = "greeting-end"
    # Send the greeting at once; Twilio must still play it in real time.
    burst_greeting: bool = False
    # Close the stream at start, as the server does for a call it does not know.
    refuse_stream: bool = False


@dataclass
class ReceivedStream:
    """Everything the fake received on a media stream, with its own arrival times."""

    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    playback: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, label
    barge_ins: list[float] = field(default_factory=list)
    # When each mark was sent, when the audio before it ends, and its name.
    marks_sent: list[tuple[float, float, str]] = field(default_factory=list)

    def of(self, event: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, m) for t, m in self.messages if m.get("event") == event]

    def voiced_media_times(self) -> list[float]:
        return [
            t for t, m in self.of("media")
            if set(base64.b64decode(m["media"]["payload"])) - ULAW_SILENT_CODES
        ]


@dataclass
class FakeCall:
    call_id: str
    answer_form: dict[str, str]
    status_forms: list[dict[str, str]] = field(default_factory=list)
    stream: ReceivedStream | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
    completion_reason: str | None = None
    ended_at: float | None = None

    def end(self, reason: str) -> None:
        if self.completion_reason is None:
            self.completion_reason = reason
            self.ended_at = time.monotonic()


class FakeVoiceService:
    """The fake service: `app` to serve, `calls` to inspect afterwards."""

    def __init__(
        self, *, token: str, api_key: str, agent: FakeAgent | None = None,
        record_delay_s: float = 0.5, greeting_text_skips_tts: bool = True,
    ) -> None:
        self.token = token
        self.api_key = api_key
        self.agent = agent or FakeAgent()
        self.record_delay_s = record_delay_s
        self.greeting_text_skips_tts = greeting_text_skips_tts
        self.calls: dict[str, FakeCall] = {}
        self.rejected_signatures = 0
        self.app = self._build_app()

    @property
    def only_call(self) -> FakeCall:
        assert len(self.calls) == 1, f"expected one call, got {len(self.calls)}"
        return next(iter(self.calls.values()))

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/voice/answer")
        async def answer(request: Request) -> Response:
            form = await self._signed_form(request)
            call = FakeCall(str(uuid.uuid4()), form)
            self.calls[call.call_id] = call
            response, connect = VoiceResponse(), Connect()
            stream = Stream(url=f"wss://{request.url.netloc}/ws")
            stream.parameter(name="call_id", value=call.call_id)
            connect.append(stream)
            response.append(connect)
            return Response(str(response), media_type="application/xml")

        @app.post("/voice/status")
        async def status(request: Request) -> Response:
            form = await self._signed_form(request)
            for call in self.calls.values():
                if call.answer_form["CallSid"] == form.get("CallSid"):
                    call.status_forms.append(form)
            return Response(status_code=204)

        @app.get("/api/calls/{call_id}")
        async def call_record(call_id: str, request: Request) -> dict[str, Any]:
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                raise HTTPException(401, "invalid API key")
            call = self.calls.get(call_id)
            if call is None:
                raise HTTPException(404, "call not found")
            settled = (
                call.ended_at is not None
                and time.monotonic() - call.ended_at >= self.record_delay_s
            )
            return {
                "id": call.call_id, "status": "completed" if settled else "in_progress",
                "completion_reason": call.completion_reason if settled else None,
                "final_state": "done" if settled else None,
                "turns": [dict(turn, seq=i) for i, turn in enumerate(call.turns, 1)],
                "tool_calls": [], "transitions": [], "events": [], "has_recording": False,
            }

        @app.websocket("/ws")
        async def media_stream(websocket: WebSocket) -> None:
            await websocket.accept()
            first = await websocket.receive_text()
            flags = parse_eval_connect(json.loads(first))
            if flags is not None:
                await self._text_session(websocket, flags)
            else:
                await PhoneCallAgent(self, websocket, json.loads(first)).run()

        return app

    async def _signed_form(self, request: Request) -> dict[str, str]:
        form = {k: str(v) for k, v in (await request.form()).items()}
        signature = request.headers.get("x-twilio-signature", "")
        if not RequestValidator(self.token).validate(str(request.url), form, signature):
            self.rejected_signatures += 1
            raise HTTPException(403, "invalid X-Twilio-Signature")
        return form

    async def _text_session(self, websocket: WebSocket, flags) -> None:
        call = self.calls.get(websocket.query_params.get("call_id", ""))
        if call is None:
            await websocket.close(code=1008, reason="unknown call")
            return
        params = EvalTransportParams(audio_in_enabled=False, audio_out_enabled=False)
        params.serializer = EvalSerializer()
        transport = EvalFastAPIWebsocketTransport(websocket, params, flags)
        user_aggregator, assistant_aggregator = LLMContextAggregatorPair(LLMContext())
        pipeline = Pipeline([
            transport.input(), user_aggregator, EchoLLM(call), transport.output(),
            assistant_aggregator,
        ])
        worker = PipelineWorker(pipeline, enable_rtvi=True)

        @transport.event_handler("on_client_connected")
        async def greet(_transport, _websocket) -> None:
            call.turns.append({"speaker_role": "agent", "text": GREETING})
            await worker.queue_frames(greeting_frames(self.greeting_text_skips_tts))

        @transport.event_handler("on_client_disconnected")
        async def disconnected(_transport, _websocket) -> None:
            call.end("caller_disconnected")
            await worker.cancel()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await runner.run()
        call.end("caller_disconnected")


def greeting_frames(skips_tts: bool) -> list[Frame]:
    """The greeting as the real server's greeting player emits it: one whole-sentence TTSTextFrame.

    Pipecat's RTVI observer holds TTS text until the bot starts speaking, which
    never happens without audio, unless the text is marked as skipping TTS.
    """
    text = TTSTextFrame(GREETING, text_type=TextType.SENTENCE, context_id="greeting")
    text.skip_tts = skips_tts
    return [TTSStartedFrame(context_id="greeting"), text, TTSStoppedFrame(context_id="greeting")]


class EchoLLM(LLMService):
    """A deterministic LLM: echoes each caller line; says goodbye and hangs up on 'goodbye'."""

    def __init__(self, call: FakeCall, **kwargs) -> None:
        super().__init__(**kwargs)
        self._call = call

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        said = next(
            (m["content"] for m in reversed(frame.context.get_messages())
             if isinstance(m, dict) and m.get("role") == "user"),
            "",
        )
        leaving = "goodbye" in said.lower()
        reply = "Goodbye." if leaving else f"You said: {said}"
        self._call.turns += [{"speaker_role": "caller", "text": said},
                             {"speaker_role": "agent", "text": reply}]
        await self.push_frame(LLMFullResponseStartFrame())
        for index, word in enumerate(reply.split(" ")):
            await self.push_frame(LLMTextFrame(word if index == 0 else " " + word))
        await self.push_frame(LLMFullResponseEndFrame())
        if leaving:
            self._call.end("agent_hangup")
            await self.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)


class PhoneCallAgent:
    """The fake agent on one Twilio media stream: greets, replies, yields to barge-ins."""

    def __init__(self, service: FakeVoiceService, websocket: WebSocket, first: dict) -> None:
        self._service = service
        self._agent = service.agent
        self._ws = websocket
        self._first = first
        self._send_lock = asyncio.Lock()
        self._playing: asyncio.Task | None = None
        self._interrupted = False
        self._replies = 0
        self._in_utterance = False
        self._last_voiced = 0.0
        self._stream_sid = ""
        self._call: FakeCall | None = None
        self._stream = ReceivedStream()

    async def run(self) -> None:
        self._stream.messages.append((time.monotonic(), self._first))
        start = json.loads(await self._ws.receive_text())
        self._stream.messages.append((time.monotonic(), start))
        self._stream_sid = start["start"]["streamSid"]
        call_id = start["start"]["customParameters"].get("call_id", "")
        if call_id not in self._service.calls or self._agent.refuse_stream:
            await self._ws.close(code=1008, reason="unknown call")  # as the real server does
            return
        self._call = self._service.calls[call_id]
        self._call.stream = self._stream
        self._call.turns.append({"speaker_role": "agent", "text": "greeting", "interrupted": False})
        self._playing = asyncio.create_task(self._play(self._agent.greeting_s, "greeting"))
        try:
            while True:
                message = json.loads(await self._ws.receive_text())
                self._stream.messages.append((time.monotonic(), message))
                if message.get("event") == "stop":
                    self._call.end("caller_hangup")
                    break
                if message.get("event") == "media":
                    await self._hear(base64.b64decode(message["media"]["payload"]))
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            if self._playing is not None:
                self._playing.cancel()
            self._call.end("caller_disconnected")

    async def _hear(self, frame: bytes) -> None:
        now = time.monotonic()
        if set(frame) - ULAW_SILENT_CODES:
            self._last_voiced = now
            if not self._in_utterance:
                self._in_utterance = True
                if self._speaking and self._agent.clear_on_barge_in:
                    await self._barge_in(now)
        elif self._in_utterance and now - self._last_voiced >= CALLER_END_OF_SPEECH_S:
            self._in_utterance = False
            self._replies += 1
            self._call.turns += [
                {"speaker_role": "caller", "text": f"utterance {self._replies}"},
                {"speaker_role": "agent", "text": f"reply {self._replies}"},
            ]
            self._playing = asyncio.create_task(self._reply(self._replies))

    @property
    def _speaking(self) -> bool:
        return self._playing is not None and not self._playing.done()

    async def _barge_in(self, now: float) -> None:
        self._interrupted = True
        self._stream.barge_ins.append(now)
        self._call.turns[-1]["interrupted"] = True
        await self._send({"event": "clear", "streamSid": self._stream_sid})

    async def _reply(self, number: int) -> None:
        await self._play(self._agent.reply_s, f"reply {number}")
        if number == self._agent.hang_up_after_reply:
            self._call.end("agent_hangup")
            await self._ws.close()

    async def _play(self, seconds: float, label: str) -> None:
        """Real-time playback in 40 ms messages, like Pipecat's output transport (or a burst)."""
        self._interrupted = False
        burst = label == "greeting" and self._agent.burst_greeting
        audio = tone_ulaw(seconds)
        step = int(CHUNK_S * 8000)
        started = next_send = time.monotonic()
        for offset in range(0, len(audio), step):
            if self._interrupted:
                break
            await self._send({
                "event": "media", "streamSid": self._stream_sid,
                "media": {"payload": base64.b64encode(audio[offset : offset + step]).decode()},
            })
            next_send += CHUNK_S
            if not burst:
                await asyncio.sleep(max(0.0, next_send - time.monotonic()))
        self._stream.playback.append((started, max(next_send, time.monotonic()), label))
        if label == "greeting" and self._agent.greeting_mark and not self._interrupted:
            self._stream.marks_sent.append((time.monotonic(), next_send, self._agent.greeting_mark))
            await self._send({
                "event": "mark", "streamSid": self._stream_sid,
                "mark": {"name": self._agent.greeting_mark},
            })

    async def _send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await self._ws.send_text(json.dumps(message))
