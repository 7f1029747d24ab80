"""Instant, deterministic stand-ins for cloud services, used by tests and benchmarks.

They go through Pipecat's real machinery (context aggregators, TTS base class), so a
test that passes with them exercises the real frame flow, not a shortcut.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import struct
from collections.abc import AsyncGenerator, Callable
from types import SimpleNamespace
from typing import Any

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings, STTSettings, TTSSettings
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.services.tts_service import TTSService
from pipecat.utils.time import time_now_iso8601

from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from config import Settings
from ops.plane import OpsPlane
from processors.llm_context import last_user_text
from runner.drain import CallDrain


def _blank(settings_cls):
    """Service settings with every field set to None: the fakes have no model or voice."""
    return settings_cls(**{f.name: None for f in dataclasses.fields(settings_cls) if f.init})


class ScriptedLLM(LLMService):
    """Answers each context with `reply(last_user_text)`, streamed word by word."""

    def __init__(self, reply: Callable[[str], str] | None = None, **kwargs) -> None:
        super().__init__(settings=_blank(LLMSettings), **kwargs)
        self._reply = reply or (lambda text: f"You said: {text}.")
        self.contexts_seen = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            self.contexts_seen += 1
            await self.push_frame(LLMFullResponseStartFrame())
            words = self._reply(last_user_text(frame)).split(" ")
            for index, word in enumerate(words):
                await self.push_frame(LLMTextFrame(word if index == 0 else " " + word))
            await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)


class FailingLLM(LLMService):
    """An LLM whose provider rejects every request (e.g. an invalid API key)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(settings=_blank(LLMSettings), **kwargs)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_error(error_msg="401 invalid x-api-key")
        else:
            await self.push_frame(frame, direction)


def tone(duration_s: float, sample_rate: int, frequency: float = 220.0) -> bytes:
    """A quiet sine tone as PCM16 mono (stands in for speech audio)."""
    count = int(duration_s * sample_rate)
    return b"".join(
        struct.pack("<h", int(3000 * math.sin(2 * math.pi * frequency * i / sample_rate)))
        for i in range(count)
    )


class InstantTTS(TTSService):
    """Returns 60 ms of tone per word at once: synthesis costs nothing."""

    def __init__(self, **kwargs) -> None:
        super().__init__(
            push_start_frame=True, push_stop_frames=True, settings=_blank(TTSSettings), **kwargs
        )

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        words = max(1, len(text.split()))
        yield TTSAudioRawFrame(
            audio=tone(0.06 * words, self.sample_rate), sample_rate=self.sample_rate,
            num_channels=1, context_id=context_id,
        )


class InstantSTT(SegmentedSTTService):
    """Transcribes every VAD-segmented utterance as the next scripted line, at once."""

    def __init__(self, lines: list[str] | None = None, **kwargs) -> None:
        super().__init__(settings=_blank(STTSettings), ttfs_p99_latency=0.05, **kwargs)
        self._lines = list(lines or [])
        self._count = 0

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        text = self._lines[self._count % len(self._lines)] if self._lines else "hello"
        self._count += 1
        yield TranscriptionFrame(text, "caller", time_now_iso8601(), finalized=True)


def make_session(writer: CollectingWriter, mode: SessionMode = SessionMode.PHONE) -> CallSession:
    """A call session whose record goes to `writer` instead of the database."""
    return CallSession(
        identity=CallIdentity("call-1"), mode=mode, log=CallLog("call-1", writer),
        clinic_name="Riverside Clinic",
    )


class CollectingWriter:
    """Captures call records instead of writing them (for processor tests)."""

    def __init__(self) -> None:
        self.records: list = []

    def submit(self, record) -> None:
        self.records.append(record)

    def of_type(self, name: str) -> list:
        return [r for r in self.records if type(r).__name__ == name]

    def events(self, type_: str | None = None) -> list:
        return [e for e in self.of_type("EventRecord") if type_ is None or e.type == type_]


class ScriptedModel:
    """A navigator model double: each prompt gets the next scripted reply.

    A reply is the model's raw text, an exception to raise, or "hang" (never answers
    in time).
    """

    def __init__(self, *replies) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if reply == "hang":
            await asyncio.sleep(10)
        return reply


def choice(name: str, filler: str | None = None, verify: bool = False) -> str:
    return json.dumps({"choice": name, "filler": filler, "verify_audio": verify})


class CallRuntime(SimpleNamespace):
    """What `runner.call_runner.run_call` needs of the AppRuntime: the live calls, the
    record writer, the settings, the operations plane (in process) and the drain."""

    def __init__(self, settings: Settings, writer: Any = None, **more: Any) -> None:
        super().__init__(active_calls={}, settings=settings, writer=writer,
                         ops=OpsPlane.from_settings(settings), drain=CallDrain(), **more)

    def call_running(self, call_id: str, task: Any) -> None:
        self.active_calls[call_id] = task

    def call_done(self, call_id: str) -> None:
        self.active_calls.pop(call_id, None)
