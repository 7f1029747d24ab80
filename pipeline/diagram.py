"""The per-call pipeline as the factory assembles it, printed: `python -m pipeline.diagram`.

The diagram is read off `build_call_pipeline` itself, so it cannot drift from it: the
widest pipeline (a phone call with a context graph, emotion on, a recording, an engage
LLM and a voice whose volume the TTS cannot set) is built and never run: stand-ins for
the transport and the STT, TTS and LLM services (which the provider plan chooses per
process), the real context-graph engine on the bundled graph with no database behind it
(nothing asks it anything). Its processors are listed in order with the file each lives
in. Each call that lacks one feature is built too, so every processor says which calls
have it.

`docs/ARCHITECTURE.md` holds this output; `tests/architecture/test_diagram.py` fails
when the two differ.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import Frame
from pipecat.pipeline.pipeline import Pipeline, PipelineSink, PipelineSource
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings, STTSettings, TTSSettings
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import BaseTransport, TransportParams

from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from call.voice_settings import VoiceSettings
from config import Settings
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from pipeline.call_deps import CallDeps, ServiceOverrides
from pipeline.factory import CallPipeline, build_call_pipeline
from pipeline.providers import ProviderPlan
from processors.emotion.call_emotion import CallEmotion

# Where the diagram sits in docs/ARCHITECTURE.md.
BEGIN = "<!-- pipeline-diagram:start -->"
END = "<!-- pipeline-diagram:end -->"


def _blank(settings_cls):
    """Service settings with every field unset: a stand-in has no model or voice."""
    return settings_cls(**{f.name: None for f in dataclasses.fields(settings_cls) if f.init})


class _STT(STTService):
    def __init__(self) -> None:
        super().__init__(settings=_blank(STTSettings))

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        yield Frame()


class _TTS(TTSService):
    def __init__(self) -> None:
        super().__init__(settings=_blank(TTSSettings))

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        yield None


class _LLM(LLMService):
    def __init__(self) -> None:
        super().__init__(settings=_blank(LLMSettings))


class _Transport(BaseTransport):
    """Stands in for the call's transport (Twilio websocket, WebRTC, Daily, eval text)."""

    def __init__(self) -> None:
        super().__init__()
        params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
        self._input = BaseInputTransport(params)
        self._output = BaseOutputTransport(params)

    def input(self) -> BaseInputTransport:
        return self._input

    def output(self) -> BaseOutputTransport:
        return self._output


@dataclass(frozen=True)
class Call:
    """Which features one built call has."""

    audio: bool = True
    graph: bool = True
    emotion: bool = True
    recording: bool = True
    llm: bool = True
    volume: bool = True


# Each feature of the widest call as the diagram names it, and the call built without it.
FEATURES: dict[str, Call] = {
    "audio": Call(audio=False),
    "context graph": Call(graph=False),
    "emotion on": Call(emotion=False),
    "recording": Call(recording=False),
    "engage LLM": Call(llm=False),
    "volume ≠ 1, TTS without volume": Call(volume=False),
}
# What a call without the feature is called, where it has processors of its own.
WITHOUT = {"audio": "a text call"}


@dataclass(frozen=True)
class Step:
    """One processor of a built pipeline: what it is and where it lives."""

    name: str
    where: str


def _built(call: Call) -> tuple[list[Step], CallPipeline]:
    settings = Settings(_env_file=None)
    plan = ProviderPlan.from_settings(settings)
    # Stand-ins fill the STT, TTS and LLM rows; a call without the stand-in LLM must not
    # get a real one built from API keys in the environment.
    plan = dataclasses.replace(plan, llm=dataclasses.replace(plan.llm, provider="local"))
    call_id = str(uuid.uuid4())
    log = CallLog(call_id, None)
    session = CallSession(
        identity=CallIdentity(call_id, "workspace", "service"),
        mode=SessionMode.PHONE if call.audio else SessionMode.TEXT, log=log,
        voice=VoiceSettings(volume=0.8 if call.volume else 1.0),
    )
    engine = None
    if call.graph:
        booking = GraphSession(identity=session.identity)
        engine = GraphEngine(bundled_graph("clinic_booking"), booking, None, log,
                               clinic_name=session.clinic_name,
                               emergency_number=settings.safety.emergency_number)
    transport = _Transport()
    stt, tts, llm = _STT(), _TTS(), _LLM() if call.llm else None
    labels: dict[int, Step] = {
        id(transport.input()): Step("transport.input()", "the call's transport"),
        id(transport.output()): Step("transport.output()", "the call's transport"),
        id(stt): Step("STT service", "pipeline/providers.py build_stt"),
        id(tts): Step("TTS service", "pipeline/providers.py build_tts"),
    }
    if llm is not None:
        labels[id(llm)] = Step("LLM service", "pipeline/providers.py build_llm")
    built = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=plan, engine=engine,
        emotion=CallEmotion() if call.emotion else None,
        recordings_dir=Path("recordings") if call.recording else None,
        overrides=ServiceOverrides(stt=stt, tts=tts, llm=llm, llm_available=call.llm),
    ))
    steps = [labels.get(id(p)) or _step(p) for p in _processors(built.worker.pipeline)]
    return steps, built


def _processors(processor: FrameProcessor) -> list[FrameProcessor]:
    """The processors frames pass through, in order (pipelines opened, their ends left out)."""
    if isinstance(processor, PipelineSource | PipelineSink):
        return []
    if isinstance(processor, Pipeline):
        return [p for child in processor.processors for p in _processors(child)]
    return [processor]


def _step(processor: object) -> Step:
    kind = type(processor)
    path = kind.__module__.replace(".", "/") + ".py"
    return Step(kind.__name__, path)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)),
                       row[-1]]).rstrip() for row in rows]


def diagram() -> str:
    """The widest pipeline, top to bottom, each processor with the calls that have it."""
    widest, built = _built(Call())
    without = {feature: _built(call)[0] for feature, call in FEATURES.items()}
    rows = []
    for number, step in enumerate(widest, 1):
        only = [f for f, steps in without.items()
                if widest[:number].count(step) > steps.count(step)]
        rows.append([f"{number:3}", step.name, step.where, ", ".join(only)])
    rows.insert(0, ["  #", "processor", "file", "only in calls with"])
    lines = _table(rows)
    recorder = _step(built.recorder)
    lines += ["", f"observer, off the voice path: {recorder.name} ({recorder.where})"]
    for feature, steps in without.items():
        for index, step in enumerate(steps):
            if steps[: index + 1].count(step) > widest.count(step):
                place = f"after {steps[index - 1].name}" if index else "first"
                call = WITHOUT.get(feature, f"a call without {feature}")
                lines.append(f"{call} adds {step.name} ({step.where}) {place}")
    return "\n".join(lines)


def main() -> None:
    logger.remove()  # building logs every link; the diagram is the output
    print(diagram())


if __name__ == "__main__":
    main()
