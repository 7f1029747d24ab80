"""The per-call Pipecat pipeline: one factory for phone, text and development calls,
tests and benchmarks.

`build_call_pipeline(transport, session, deps)` assembles, in this order:

    transport in -> [text bridge | STT] -> before_context layers -> [world extractor]
    -> user aggregator (Silero VAD + smart-turn v3) -> [caller audio end] -> before_llm
    layers -> [graph navigator (+ Flows)] -> fallback responder -> [LLM]
    -> after_llm layers -> TTS -> [voice volume] -> greeting player
    -> transport out -> [agent audio tap] -> call controller -> assistant aggregator

The layers (pipeline/layers.py) are the intelligence processors of each feature, and
`docs/ARCHITECTURE.md` shows the order as `python -m pipeline.diagram` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipecat.audio.turn.smart_turn.base_smart_turn import SmartTurnParams
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.flows import FlowManager
from pipecat.frames.frames import ErrorFrame, Frame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.service_switcher import ServiceSwitcher
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy
from pipecat.turns.user_stop import (
    SpeechTimeoutUserTurnStopStrategy,
    TurnAnalyzerUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from call.call_session import CallSession, CompletionReason, SessionMode
from call.recording import StereoRecording
from flows.graph_engine import GraphEngine
from flows.graph_navigator_processor import GraphNavigatorProcessor
from lib.prompts import render_prompt
from observers.call_record_observer import CallRecordObserver
from pipeline.call_deps import CallDeps
from pipeline.layers import conversation_layer, emotion_layer
from pipeline.providers import build_llm, build_stt, build_tts
from pipeline.stt_failover import announce_failover
from processors.call_control.call_controller_processor import CallControllerProcessor
from processors.call_control.fallback_responder_processor import FallbackResponderProcessor
from processors.emotion.call_emotion import CallEmotion
from processors.voice.audio_tap_processor import agent_audio_tap
from processors.voice.caller_audio_end_processor import CallerAudioEndProcessor
from processors.voice.greeting_player_processor import GreetingPlayerProcessor
from processors.voice.text_input_processor import TextInputProcessor
from processors.voice.voice_volume_processor import VoiceVolumeProcessor
from processors.world.extraction import CallExtraction, RulesExtractor
from processors.world.world_extractor_processor import WorldExtractorProcessor
from services.espeak.tts import EspeakTTSService
from services.turn_models import SharedSileroVADAnalyzer, SharedSmartTurnAnalyzerV3
from turns.deferred_turns import MAX_AGE_S as DEFERRED_MAX_AGE_S
from turns.deferred_turns import DeferredTurns
from turns.semantic_barge_in_user_turn_start_strategy import SemanticBargeInUserTurnStartStrategy

# Typed lines end their turn almost at once; there is no speech to wait for.
TEXT_TURN_TIMEOUT_S = 0.05


@dataclass
class CallPipeline:
    """What the caller of `build_call_pipeline` needs to run and finish a call."""

    worker: PipelineWorker
    recorder: CallRecordObserver
    recording: StereoRecording | None
    controller: CallControllerProcessor
    initial_frames: list[Frame] = field(default_factory=list)
    extractor: WorldExtractorProcessor | None = None  # finished by the call runner after the call
    emotion: CallEmotion | None = None  # summarised into the record when the call ends
    engine: GraphEngine | None = None  # closes an outbound call's task when the call ends


def user_aggregator_params(
    session: CallSession, turn_max_silence_s: float = 1.5,
    deferred_turn_max_age_s: float = DEFERRED_MAX_AGE_S,
) -> LLMUserAggregatorParams:
    """Turn detection: Silero VAD + smart-turn v3 for audio, a short timeout for typed lines.
    A short answer said over the agent is kept at most `deferred_turn_max_age_s`."""
    if session.is_audio:
        vad = SharedSileroVADAnalyzer(params=VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2))
        turn_model = SharedSmartTurnAnalyzerV3(params=SmartTurnParams(stop_secs=turn_max_silence_s))
        return LLMUserAggregatorParams(
            vad_analyzer=vad,
            user_turn_strategies=UserTurnStrategies(
                # Voice activity starts a turn while the agent is silent; while it speaks,
                # only words (or a second of speech) interrupt it, and a short answer is
                # kept until it has finished.
                start=[SemanticBargeInUserTurnStartStrategy(
                    session, deferred=DeferredTurns(max_age_s=deferred_turn_max_age_s))],
                stop=[TurnAnalyzerUserTurnStopStrategy(turn_analyzer=turn_model)],
            ),
        )
    return LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(
            start=[TranscriptionUserTurnStartStrategy()],
            stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=TEXT_TURN_TIMEOUT_S)],
        )
    )


def build_call_pipeline(
    transport: BaseTransport, session: CallSession, deps: CallDeps
) -> CallPipeline:
    """Assemble the pipeline and its worker for one call."""
    settings, plan, overrides, engine = deps.settings, deps.plan, deps.overrides, deps.engine
    system_instruction = render_prompt("system.md", clinic_name=session.clinic_name)
    session.instruction.base = system_instruction

    llm = overrides.llm or build_llm(plan, settings, system_instruction)
    llm_available = overrides.llm_available
    if llm_available is None:
        llm_available = llm is not None
    tts = overrides.tts or build_tts(plan, settings, session.voice, faults=session.log.event)
    stt = None
    if session.is_audio:
        stt = overrides.stt or build_stt(plan, settings, session.keyterms,
                                         faults=session.log.event)

    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context, user_params=user_aggregator_params(
            session, settings.turns.turn_max_silence_s, settings.turns.deferred_turn_max_age_s)
    )
    user_aggregator, assistant_aggregator = aggregators
    controller = CallControllerProcessor(session, max_duration_s=settings.call.max_call_duration_s)
    recording = None
    if session.is_audio and deps.recordings_dir is not None:
        recording = StereoRecording(session, deps.recordings_dir, deps.sample_rate)

    emotion = emotion_layer(session, deps, tts)
    conversation = conversation_layer(session, deps, can_regenerate=llm is not None)

    processors: list[FrameProcessor] = [transport.input()]
    processors.append(stt if stt is not None else TextInputProcessor())
    processors += emotion.before_context + conversation.before_context
    world_extractor = None
    if engine is not None and session.workspace_id is not None:
        # The world model's extracted facts: captured from each caller turn.
        world_extractor = WorldExtractorProcessor(
            session, engine.session, CallExtraction(
                engine.pool, session.workspace_id, session.call_id,
                deps.extractor or RulesExtractor(country_code=settings.world.phone_country_code)),
            timeout_s=settings.world.extraction_timeout_s)
        processors.append(world_extractor)
    processors.append(user_aggregator)
    if session.is_audio:
        processors.append(CallerAudioEndProcessor(recording, session.turn_audio))
    processors += conversation.before_llm + emotion.before_llm
    navigator = None
    if engine is not None:
        navigator = GraphNavigatorProcessor(session, engine, emotion=deps.emotion,
                                   audio_verifier=deps.audio_verifier,
                                   audio_timeout_s=settings.world.audio_verification_timeout_s)
        processors.append(navigator)
    processors.append(FallbackResponderProcessor(session, llm_available=llm_available,
                                                  call_backs=deps.call_backs))
    if llm is not None:
        processors.append(llm)
    processors += conversation.after_llm + emotion.after_llm
    processors.append(tts)
    if session.voice.volume != 1.0 and not isinstance(tts, EspeakTTSService):
        # The voice has no volume of its own.
        processors.append(VoiceVolumeProcessor(session.voice.volume))
    processors += [GreetingPlayerProcessor(session, deps.greeting), transport.output()]
    if recording is not None:
        processors.append(agent_audio_tap(recording))
    processors += [controller, assistant_aggregator]

    recorder = CallRecordObserver(session, emotion=deps.emotion)
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(
            audio_in_sample_rate=deps.sample_rate,
            audio_out_sample_rate=deps.sample_rate,
            enable_metrics=True,
        ),
        observers=[recorder],
        # Our recorder times every turn; Pipecat's turn tracker would observe every
        # frame hop a second time for tracing we do not use.
        enable_turn_tracking=False,
        enable_rtvi=session.mode is not SessionMode.PHONE,
        idle_timeout_secs=settings.call.idle_timeout_s,
    )
    record_worker_events(worker, session)
    if isinstance(stt, ServiceSwitcher):
        # The offline recognizer taking over is said to the caller, never silent.
        announce_failover(stt, faults=session.log.event,
                          say=lambda line: worker.queue_frame(TTSSpeakFrame(line)))
    if navigator is not None and llm is not None:
        # Flows owns the engage LLM's context and tools, node by node.
        navigator.engage_with(FlowManager(llm=llm, context_aggregator=aggregators, worker=worker))
    initial_frames: list[Frame] = []
    if deps.greeting is None and deps.greeting_text:
        # Not pre-rendered in time: synthesize it live, first thing after start.
        session.log.event("greeting", prerendered=False)
        initial_frames.append(TTSSpeakFrame(deps.greeting_text))
    return CallPipeline(
        worker=worker, recorder=recorder, recording=recording, controller=controller,
        initial_frames=initial_frames, extractor=world_extractor, emotion=deps.emotion,
        engine=deps.engine,
    )


def record_worker_events(worker: PipelineWorker, session: CallSession) -> None:
    """Why the worker ended a call by itself (silence, a fatal error) goes into the record.

    The errors themselves are `pipeline_error` events from the call recorder.
    """

    @worker.event_handler("on_idle_timeout")
    async def _on_idle(_worker) -> None:
        session.log.event("idle_timeout")
        session.end_as(CompletionReason.IDLE_TIMEOUT)

    @worker.event_handler("on_pipeline_error")
    async def _on_error(_worker, frame: ErrorFrame) -> None:
        if frame.fatal:
            session.end_as(CompletionReason.PIPELINE_ERROR)
