"""One caller turn, one pass: what each processor of a real call's pipeline is handed.

The call is built by `pipeline.factory.build_call_pipeline` with a context graph, an
engage LLM (Pipecat Flows) and emotion on; the STT, the LLM and the TTS are the instant
stand-ins of tests/fakes.py, the turn detection is the real Silero VAD and smart-turn v3
on eSpeak speech. An observer counts the frames each processor processes. A turn reaches
the LLM as one context frame; the Flows node it is answered in never goes back through
the transport, the STT and the observers; the observers that read words never hear
audio, and what follows the transport output never gets the agent's; the voice note is
in the caller's message once; a tool whose outcome opens another node still moves the
call on and is answered.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import date

import pytest
from pipecat.frames.frames import (
    Frame,
    FunctionCallFromLLM,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMMessagesUpdateFrame,
    LLMRunFrame,
    LLMSetToolsFrame,
    OutputAudioRawFrame,
    TranscriptionFrame,
)
from pipecat.observers.base_observer import BaseObserver, FrameProcessed
from pipecat.pipeline.pipeline import Pipeline, PipelineSink, PipelineSource
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.utils.time import time_now_iso8601
from pipecat.workers.runner import WorkerRunner

from bench.harness import MemoryTransport, speak, trim_trailing_silence
from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from config import Settings
from db import repositories as repo
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import CallPipeline, build_call_pipeline
from pipeline.providers import ProviderPlan
from processors.conversation.guidance_filter import is_guidance_message
from processors.emotion.call_emotion import CallEmotion
from services.emotion.reading import EmotionReading, Source
from services.espeak.engine import synthesize_pcm
from services.vader.emotion import LocalTextProvider
from tests.fakes import CollectingWriter, InstantSTT, InstantTTS, ScriptedLLM

pytestmark = pytest.mark.timeout(90)

RATE = 8000
LINES = ["I'd like to book an appointment", "A check-up for my back please"]
# The layers that read the caller's words, never their voice.
WORDS_ONLY = ["QuickObserverProcessor", "SafetyMonitorProcessor",
              "ConversationDirectorProcessor", "SilenceMonitorProcessor",
              "WorldExtractorProcessor"]


def is_flows_frame(frame: Frame) -> bool:
    """What Flows queues to enter a node: its task messages, its tools, the LLM run."""
    if isinstance(frame, (LLMMessagesAppendFrame, LLMMessagesUpdateFrame)):
        return any(m.get("role") == "developer" for m in frame.messages)
    return isinstance(frame, (LLMRunFrame, LLMSetToolsFrame))


class FramesSeen(BaseObserver):
    """Counts the frames each processor processes, by its class name."""

    def __init__(self) -> None:
        super().__init__(observe_every_push=False)
        self.seen: Counter[tuple[str, type[Frame], FrameDirection]] = Counter()
        self.flows: Counter[str] = Counter()

    async def on_process_frame(self, data: FrameProcessed) -> None:
        name = type(data.processor).__name__
        self.seen[(name, type(data.frame), data.direction)] += 1
        if is_flows_frame(data.frame):
            self.flows[name] += 1

    def count(self, processor: str, kind: type[Frame],
              direction: FrameDirection = FrameDirection.DOWNSTREAM) -> int:
        return sum(n for (name, frame, way), n in self.seen.items()
                   if name == processor and issubclass(frame, kind) and way is direction)


def processor_names(call: CallPipeline) -> list[str]:
    """The call's processors in pipeline order, chains opened."""
    def walk(processor: FrameProcessor) -> list[str]:
        if isinstance(processor, PipelineSource | PipelineSink):
            return []
        if isinstance(processor, Pipeline):
            return [name for child in processor.processors for name in walk(child)]
        return [type(processor).__name__]
    return walk(call.worker.pipeline)


def before(names: list[str], processor: str) -> list[str]:
    return names[:names.index(processor)]


class ContextKeepingLLM(ScriptedLLM):
    """The scripted LLM, keeping the caller's messages as each run saw them, and calling a
    tool (as a model would, through Pipecat's function calling) on the first run whose
    Flows task says to do an action of `calls` (action: tool)."""

    def __init__(self, calls: dict[str, str] | None = None) -> None:
        super().__init__()
        self.runs: list[list[str]] = []
        self.tasks: list[str] = []
        self._calls = dict(calls or {})

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if not isinstance(frame, LLMContextFrame):
            await super().process_frame(frame, direction)
            return
        messages = frame.context.get_messages()
        self.runs.append([m["content"] for m in messages if m.get("role") == "user"
                          and not is_guidance_message(str(m["content"]))])
        self.tasks.append(next((m["content"] for m in reversed(messages)
                                if m.get("role") == "developer"), ""))
        action = next((a for a in self._calls if f"Do now: {a} " in self.tasks[-1]), None)
        if action is not None:
            tool = self._calls.pop(action)
            await LLMService.process_frame(self, frame, direction)  # the node's handlers
            await self.push_frame(LLMFullResponseStartFrame())
            await self.run_function_calls([FunctionCallFromLLM(
                function_name=tool, tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
                arguments={}, context=frame.context)])
            await self.push_frame(LLMFullResponseEndFrame())
            return
        await super().process_frame(frame, direction)


class AngryVoice:
    """Hears anger in every segment (a cloud emotion provider that works)."""

    name = "angry"

    async def connect(self) -> None:
        pass

    async def analyze(self, pcm, sample_rate, *, at):
        return [EmotionReading(Source.PROSODY, {"Anger": 0.9}, at, provider=self.name)]

    async def close(self) -> None:
        pass


def angry_caller() -> CallEmotion:
    """Two segments already heard as anger: the steering has a voice to note."""
    emotion = CallEmotion()
    for ago in (2.0, 1.0):
        emotion.state.add(EmotionReading(Source.PROSODY, {"Anger": 0.9}, emotion.clock() - ago))
    return emotion


def offline_engine(session: CallSession) -> GraphEngine:
    """The clinic graph with no database behind it (the first turns need none)."""
    booking = GraphSession(identity=session.identity, services_read=True, upcoming=[])
    return GraphEngine(bundled_graph("clinic_booking"), booking, pool=None, log=session.log,
                       clinic_name="Riverside Clinic", emergency_number="911",
                       today=lambda: date(2026, 11, 24))


async def running(call: CallPipeline, seen: FramesSeen) -> asyncio.Task:
    call.worker.add_observer(seen)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    task = asyncio.create_task(runner.run())
    await asyncio.sleep(0.3)
    return task


async def finished(call: CallPipeline, task: asyncio.Task) -> None:
    await asyncio.sleep(0.5)  # the observer's queue drains
    await call.worker.cancel()
    await asyncio.wait_for(task, 10)


async def until(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the call never got there"
        await asyncio.sleep(0.05)


async def test_a_spoken_turn_is_one_pass_and_audio_goes_only_where_it_is_heard(writer):
    session = CallSession(identity=CallIdentity("call-1", "w", "s"), mode=SessionMode.PHONE,
                          log=CallLog("call-1", writer), clinic_name="Riverside Clinic")
    settings = Settings(_env_file=None)
    llm = ContextKeepingLLM()
    transport = MemoryTransport(RATE)
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings),
        engine=offline_engine(session), emotion=angry_caller(),
        overrides=ServiceOverrides(stt=InstantSTT(LINES), llm=llm, tts=InstantTTS(),
                                   emotion_audio=AngryVoice(), emotion_text=LocalTextProvider()),
    ))
    seen = FramesSeen()
    task = await running(call, seen)
    for line in LINES:
        pcm = trim_trailing_silence(await synthesize_pcm(line, RATE, words_per_minute=200), RATE)
        await speak(transport, pcm, RATE, silence_s=2.5)
    await finished(call, task)

    names = processor_names(call)
    up_to_navigator = before(names, "GraphNavigatorProcessor")
    # Each turn is one context frame from the user aggregator to the LLM, and the node
    # it is answered in is entered from the navigator: nothing of it passes again.
    assert len(llm.runs) == len(LINES)
    for name in ["AgentGateProcessor", "EmotionSteeringProcessor", "GraphNavigatorProcessor",
                 "FallbackResponderProcessor", "ContextKeepingLLM"]:
        assert seen.count(name, LLMContextFrame) == len(LINES), name
    assert {name: seen.flows[name] for name in up_to_navigator} == dict.fromkeys(
        up_to_navigator, 0)
    for name in before(names, "LLMUserAggregator"):
        assert seen.count(name, LLMContextFrame) == 0, name
    assert all("Do now:" in task for task in llm.tasks)  # each run in its node
    # The voice note is in each caller message once, also as the later turn saw it.
    assert [[said.count("[VOICE: Anger") for said in run] for run in llm.runs] == [[1], [1, 1]]
    # Caller audio: heard by the STT, the emotion tap and turn detection, passed by the
    # layers that read words, gone after the caller audio end.
    for name in ["InstantSTT", "EmotionTapProcessor", "LLMUserAggregator",
                 "CallerAudioEndProcessor"]:
        assert seen.count(name, InputAudioRawFrame) > 100, name
    for name in WORDS_ONLY + names[names.index("CallerAudioEndProcessor") + 1:]:
        assert seen.count(name, InputAudioRawFrame) == 0, name
    for name in WORDS_ONLY:
        assert seen.count(name, TranscriptionFrame) == len(LINES), name
    # Agent audio: played, then gone after the agent audio end.
    assert seen.count("AgentAudioEndProcessor", OutputAudioRawFrame) > 0
    for name in ["CallControllerProcessor", "LLMAssistantAggregator"]:
        assert seen.count(name, OutputAudioRawFrame) == 0, name
    replies = [t.text for t in writer.of_type("TurnRecord") if t.speaker_role == "agent"]
    assert replies[-1] == f"You said: {LINES[-1]}."


async def test_a_tools_transition_moves_the_call_on_and_its_node_is_answered_in_one_pass(
    db, demo_clinic
):
    workspace_id, service_id = demo_clinic
    caller = "+15550100201"  # Margaret Chen, a patient of the demo clinic
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="inbound", from_number=caller, to_number=None, status="in_progress")
    writer = CollectingWriter()
    session = CallSession(identity=CallIdentity(call_id, workspace_id, service_id, caller),
                          mode=SessionMode.TEXT, log=CallLog(call_id, writer),
                          clinic_name="Demo Family Clinic")
    engine = GraphEngine(bundled_graph("clinic_booking"), GraphSession(identity=session.identity),
                         db.pool, session.log, clinic_name="Demo Family Clinic",
                         emergency_number="911")
    llm = ContextKeepingLLM({"ask_preferred_time": "GetServicesAndPricing",
                             "propose_initial_slot": "CheckAvailability"})
    settings = Settings(_env_file=None)
    call = build_call_pipeline(MemoryTransport(RATE), session, CallDeps(
        settings=settings, plan=ProviderPlan.from_settings(settings), engine=engine,
        overrides=ServiceOverrides(llm=llm, tts=InstantTTS()),
    ))
    seen = FramesSeen()
    task = await running(call, seen)
    lines = ["Hi, I need to book a physio session.", "Sometime next week in the afternoon."]
    # Each turn is a run that calls a tool, then one more: on the first turn the model
    # talks about a lookup's result, on the second it speaks in the node the tool's
    # outcome opened.
    for line, runs in zip(lines, (2, 4), strict=True):
        await call.worker.queue_frame(
            TranscriptionFrame(line, "caller", time_now_iso8601(), finalized=True))
        await until(lambda n=runs: len(llm.runs) == n)
    await until(lambda: any(t.speaker_role == "agent" and t.text == f"You said: {lines[-1]}."
                            for t in writer.of_type("TurnRecord")))
    await finished(call, task)

    assert engine.state == "offering_slots"  # the slots read out moved the call on
    tools = {r.name: r.succeeded for r in writer.of_type("ToolCallRecord")}
    assert tools == {"GetServicesAndPricing": True, "CheckAvailability": True}
    assert llm.tasks[1] == llm.tasks[0]  # the lookup's result, talked about in its node
    assert "Do now: propose_initial_slot " in llm.tasks[2]
    assert "offering_slots" in llm.tasks[3] and llm.tasks[3] != llm.tasks[2]
    names = processor_names(call)
    up_to_navigator = before(names, "GraphNavigatorProcessor")
    assert {name: seen.flows[name] for name in up_to_navigator} == dict.fromkeys(
        up_to_navigator, 0)
    for name in ["AgentGateProcessor", "GraphNavigatorProcessor"]:
        assert seen.count(name, LLMContextFrame) == len(lines), name  # one per turn
    # A transition's run starts at the navigator, as the turns' runs do; a result the
    # model is to talk about goes back up to it from the assistant aggregator.
    assert seen.count("FallbackResponderProcessor", LLMContextFrame) == 3
    assert seen.count("ContextKeepingLLM", LLMContextFrame) == 3
    assert seen.count("ContextKeepingLLM", LLMContextFrame, FrameDirection.UPSTREAM) == 1
    for name in names[:names.index("ContextKeepingLLM")]:
        assert seen.count(name, LLMContextFrame, FrameDirection.UPSTREAM) == 0, name
