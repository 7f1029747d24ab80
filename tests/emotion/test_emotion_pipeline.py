"""The whole call pipeline with the emotion layers in it: what the caller's state does to
the LLM's context, instruction and voice, and that a failing emotion provider — at
connect, mid-call, or answering junk — never stops the agent answering.

Real speech (eSpeak) goes through the real VAD, turn model and aggregators; STT, LLM
and TTS are instant stand-ins (tests/fakes.py) so each turn is quick and exact.
"""

from __future__ import annotations

import asyncio

import pytest
from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport, speak, trim_trailing_silence
from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from config import Settings
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from processors.emotion.call_emotion import CallEmotion
from services.emotion.provider import ProviderUnavailable
from services.emotion.reading import EmotionReading, Source
from services.espeak.engine import synthesize_pcm
from services.vader.emotion import LocalTextProvider
from tests.fakes import CollectingWriter, InstantSTT, InstantTTS, ScriptedLLM

pytestmark = pytest.mark.timeout(60)

RATE = 8000
LINES = ["This is ridiculous, I have been waiting for weeks", "Just give me the earliest one"]


class ContextKeepingLLM(ScriptedLLM):
    """The scripted LLM, keeping what each run saw: the caller's message as sent."""

    def __init__(self) -> None:
        super().__init__()
        self.user_messages: list[str] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, LLMContextFrame):
            users = [m for m in frame.context.get_messages() if m.get("role") == "user"]
            self.user_messages.append(str(users[-1]["content"]) if users else "")
        await super().process_frame(frame, direction)


class AngryVoice:
    """Hears anger in every segment (a stand-in for a cloud provider that works)."""

    name = "angry"

    async def connect(self) -> None:
        pass

    async def analyze(self, pcm, sample_rate, *, at):
        return [EmotionReading(Source.PROSODY, {"Anger": 0.9}, at, provider=self.name)]

    async def close(self) -> None:
        pass


class BrokenVoice(AngryVoice):
    def __init__(self, how: str) -> None:
        self.how = how

    async def connect(self) -> None:
        if self.how == "connect":
            raise ProviderUnavailable("401 invalid api key")

    async def analyze(self, pcm, sample_rate, *, at):
        if self.how == "mid_call":
            raise ConnectionError("socket closed by peer")
        return {"Anger": "very"}  # junk: not readings


class JunkWords:
    """A text provider whose model answers nonsense (as LLMTextProvider raises then)."""

    name = "junk"

    async def analyze(self, text, *, at):
        raise ValueError("not language emotion scores")


async def run_call(audio, text) -> tuple[ContextKeepingLLM, CallEmotion, CollectingWriter]:
    writer = CollectingWriter()
    session = CallSession(identity=CallIdentity("call-e"), mode=SessionMode.PHONE,
                          log=CallLog("call-e", writer),
                          clinic_name="Riverside Clinic")
    emotion = CallEmotion()
    settings = Settings(_env_file=None)
    llm = ContextKeepingLLM()
    transport = MemoryTransport(RATE)
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings), emotion=emotion,
        overrides=ServiceOverrides(stt=InstantSTT(LINES), llm=llm, tts=InstantTTS(),
                                   emotion_audio=audio, emotion_text=text),
    ))
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    running = asyncio.create_task(runner.run())
    await asyncio.sleep(0.3)
    for line in LINES:
        pcm = trim_trailing_silence(await synthesize_pcm(line, RATE, words_per_minute=200), RATE)
        await speak(transport, pcm, RATE, silence_s=2.5)
    await call.worker.cancel()
    await asyncio.wait_for(running, 10)
    return llm, emotion, writer


def agent_lines(writer: CollectingWriter) -> list[str]:
    return [t.text for t in writer.of_type("TurnRecord") if t.speaker_role == "agent"]


async def test_an_angry_caller_changes_what_the_llm_is_told_and_how_the_agent_sounds():
    llm, emotion, writer = await run_call(AngryVoice(), LocalTextProvider())

    assert len(llm.user_messages) == 2
    assert "[VOICE: Anger, valence=-0.6" in llm.user_messages[-1]  # the model sees the voice
    instruction = llm._settings.system_instruction  # noqa: SLF001 - what the LLM now runs with
    assert "mostly anger" in instruction and "De-escalate" in instruction
    assert "never mention" in instruction
    assert [e.data["tone"] for e in writer.events("tone")][-1] == "calm"
    caller_turns = [t for t in writer.of_type("TurnRecord") if t.speaker_role == "caller"]
    assert caller_turns[-1].emotion == "Anger" and caller_turns[-1].valence < -0.5
    summary = emotion.summary_record()
    assert summary["dominant_counts"]["Anger"] >= 1 and summary["provider_health"] == {
        "audio": "closed", "text": "closed"}


@pytest.mark.parametrize(("how", "state"), [
    ("connect", "disabled"), ("mid_call", "open"), ("junk", "open"),
])
async def test_the_agent_answers_every_turn_whatever_the_emotion_provider_does(how, state):
    llm, emotion, writer = await run_call(BrokenVoice(how), JunkWords())

    assert len(agent_lines(writer)) >= 2 and len(llm.user_messages) == 2
    assert all("[VOICE" not in message for message in llm.user_messages)  # nothing heard
    audio_states = [e.data["state"] for e in writer.events("emotion_provider")
                    if e.data["channel"] == "audio"]
    assert audio_states[0] == state
    assert any(e.data["channel"] == "text" for e in writer.events("emotion_provider"))
    assert emotion.summary_record()["provider_health"]["audio"] in ("open", "disabled",
                                                                             "half_open")
