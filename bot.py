"""The per-call Pipecat pipeline: one factory for production, tests, the simulator and benchmarks.

    transport in -> [text bridge | STT] -> [emotion tap] -> before_context layers
    -> user aggregator (Silero VAD + smart-turn v3) -> caller audio end -> before_llm
    layers -> [emotion steering] -> [graph navigator (+ Flows)] -> fallback responder -> LLM
    -> after_llm layers -> [voice tone] -> TTS -> greeting player
    -> transport out -> agent audio tap -> call controller -> assistant aggregator

Later issues insert the intelligence processors (emotion, observers, safety,
director, navigator, filler, stripper, tone) through `IntelligenceLayers`, the
named place between STT and TTS. `python bot.py -t webrtc|daily|twilio` runs the
same pipeline under Pipecat's development runner.
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipecat.audio.turn.smart_turn.base_smart_turn import SmartTurnParams
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.flows import FlowManager
from pipecat.frames.frames import ErrorFrame, Frame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy
from pipecat.turns.user_stop import (
    SpeechTimeoutUserTurnStopStrategy,
    TurnAnalyzerUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from config import Settings
from flows.engine import BookingEngine
from flows.graph import DEFAULT_TIME_LIMIT, TimeLimitPolicy
from processors.conversation.agent_gate import AgentGate
from processors.voice.audio_taps import CallerAudioEnd, agent_audio_tap
from processors.call_control.call_controller import CallController
from observers.call_recorder import CallRecorder
from processors.conversation.conversation_director import ConversationDirector
from processors.emotion.emotion_steering import EmotionSteering
from processors.emotion.emotion_tap import EmotionTap
from processors.call_control.fallback_responder import FallbackResponder
from flows.graph_navigator import GraphNavigator
from processors.voice.greeting_player import GreetingPlayer, PrerenderedSpeech
from processors.conversation.guidance_stripper import GuidanceStripper
from processors.conversation.quick_observer import QuickObserver
from processors.conversation.reply_guard import ReplyGuard
from processors.call_control.reply_watchdog import SilentReplyWatchdog
from processors.safety.safety_monitor import SafetyMonitor
from turns.semantic_barge_in import SemanticBargeInStrategy
from processors.conversation.silence_monitor import SilenceMonitor
from processors.voice.text_input import TextInputBridge
from processors.emotion.tone_controller import ToneController, tone_settings_of
from processors.voice.voice_volume import VoiceVolume
from processors.world.world_extractor import WorldExtractor
from call.call_session import CallSession, CompletionReason, SessionMode
from services.embeddings import LocalEmbedder
from processors.emotion.providers import (
    AudioEmotionProvider,
    LocalAudioProvider,
    TextEmotionProvider,
)
from services.espeak.tts import EspeakTTSService
from turns.deferred_turns import MAX_AGE_S as DEFERRED_MAX_AGE_S
from turns.deferred_turns import DeferredTurns
from processors.conversation.director import DirectorBackend, LocalDirector
from processors.conversation.silence_schedule import SilenceSchedule
from lib.prompts import render_prompt
from runner.providers import (
    EmotionProviders,
    ProviderPlan,
    build_llm,
    build_stt,
    build_tts,
)
from call.recording import StereoRecording
from processors.safety.concepts import ConceptIndex
from processors.safety.judge import RulesJudge
from processors.safety.monitor import SafetyServices
from services.turn_models import SharedSileroVADAnalyzer, SharedSmartTurnAnalyzerV3
from processors.world.audio_check import AudioVerifier
from processors.world.extraction import CallExtraction, Extractor, RulesExtractor

PHONE_SAMPLE_RATE = 8000

# Typed lines end their turn almost at once; there is no speech to wait for.
TEXT_TURN_TIMEOUT_S = 0.05


@dataclass
class IntelligenceLayers:
    """The named place for the intelligence processors, each list in pipeline order."""

    before_context: list[FrameProcessor] = field(default_factory=list)
    before_llm: list[FrameProcessor] = field(default_factory=list)
    after_llm: list[FrameProcessor] = field(default_factory=list)


def no_layers(_session: CallSession) -> IntelligenceLayers:
    """This issue adds none; later issues return their processors here."""
    return IntelligenceLayers()


@dataclass
class ServiceOverrides:
    """Replace providers (tests and benchmarks use instant fakes; production never does)."""

    stt: STTService | None = None
    tts: TTSService | None = None
    llm: LLMService | None = None
    llm_available: bool | None = None
    emotion_audio: AudioEmotionProvider | None = None
    emotion_text: TextEmotionProvider | None = None


@dataclass
class CallPipeline:
    """What the caller of `build_call_pipeline` needs to run and finish a call."""

    worker: PipelineWorker
    recorder: CallRecorder
    recording: StereoRecording | None
    controller: CallController
    initial_frames: list[Frame] = field(default_factory=list)
    extractor: WorldExtractor | None = None  # finished by the call runner after the call


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
                start=[SemanticBargeInStrategy(
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
    transport: BaseTransport,
    session: CallSession,
    *,
    settings: Settings,
    plan: ProviderPlan,
    greeting: PrerenderedSpeech | None = None,
    greeting_text: str | None = None,
    layers: Callable[[CallSession], IntelligenceLayers] = no_layers,
    overrides: ServiceOverrides | None = None,
    recordings_dir: Path | None = None,
    engine: BookingEngine | None = None,
    audio_in_sample_rate: int = PHONE_SAMPLE_RATE,
    audio_out_sample_rate: int = PHONE_SAMPLE_RATE,
    emotion_providers: EmotionProviders | None = None,
    director: DirectorBackend | None = None,
    safety: SafetyServices | None = None,
    safety_index: ConceptIndex | None = None,
    extractor: Extractor | None = None,
    audio_verifier: AudioVerifier | None = None,
) -> CallPipeline:
    """Assemble the pipeline and its worker for one call."""
    overrides = overrides or ServiceOverrides()
    system_instruction = render_prompt("system.md", clinic_name=session.clinic_name)
    session.instruction.base = system_instruction

    llm = overrides.llm or build_llm(plan, settings, system_instruction)
    llm_available = overrides.llm_available
    if llm_available is None:
        llm_available = llm is not None
    tts = overrides.tts or build_tts(plan, settings, session.voice)
    stt = None
    if session.is_audio:
        stt = overrides.stt or build_stt(plan, settings, session.keyterms)

    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context, user_params=user_aggregator_params(
            session, settings.turn_max_silence_s, settings.deferred_turn_max_age_s)
    )
    user_aggregator, assistant_aggregator = aggregators
    chosen = layers(session)
    controller = CallController(session, max_duration_s=settings.max_call_duration_s)
    recording = None
    if session.is_audio and recordings_dir is not None:
        recording = StereoRecording(session, recordings_dir, audio_in_sample_rate)

    emotion = emotion_processors(
        session, emotion_providers or EmotionProviders.local(), overrides, tts
    )
    observers = observer_processors(
        session, settings, director or LocalDirector(),
        safety or SafetyServices(embedder=LocalEmbedder(), judge=RulesJudge()), safety_index,
        time_limit=engine.graph.time_limit if engine is not None else DEFAULT_TIME_LIMIT,
        can_regenerate=llm is not None,
    )

    processors: list[FrameProcessor] = [transport.input()]
    processors.append(stt if stt is not None else TextInputBridge())
    processors += emotion.before_context + observers.before_context + chosen.before_context
    world_extractor = None
    if engine is not None and session.workspace_id is not None:
        # Channel 3 of the world model: facts captured from each caller turn.
        world_extractor = WorldExtractor(
            session, engine.session, CallExtraction(
                engine.pool, session.workspace_id, session.call_id,
                extractor or RulesExtractor(country_code=settings.phone_country_code)),
            timeout_s=settings.extraction_timeout_s)
        processors.append(world_extractor)
    processors.append(user_aggregator)
    if session.is_audio:
        processors.append(CallerAudioEnd(recording, session.turn_audio))
    processors += observers.before_llm + chosen.before_llm + emotion.before_llm
    navigator = None
    if engine is not None:
        navigator = GraphNavigator(session, engine, audio_verifier=audio_verifier,
                                   audio_timeout_s=settings.audio_verification_timeout_s)
    if navigator is not None:
        processors.append(navigator)
    processors.append(FallbackResponder(session, llm_available=llm_available))
    if llm is not None:
        processors.append(llm)
    processors += chosen.after_llm + observers.after_llm + emotion.after_llm
    processors.append(tts)
    if session.voice.volume != 1.0 and not isinstance(tts, EspeakTTSService):
        processors.append(VoiceVolume(session.voice.volume))  # the voice has no volume of its own
    processors += [GreetingPlayer(session, greeting), transport.output()]
    if recording is not None:
        processors.append(agent_audio_tap(recording))
    processors += [controller, assistant_aggregator]

    recorder = CallRecorder(session)
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(
            audio_in_sample_rate=audio_in_sample_rate,
            audio_out_sample_rate=audio_out_sample_rate,
            enable_metrics=True,
        ),
        observers=[recorder],
        # Our recorder times every turn; Pipecat's turn tracker would observe every
        # frame hop a second time for tracing we do not use.
        enable_turn_tracking=False,
        enable_rtvi=session.mode is not SessionMode.PHONE,
        idle_timeout_secs=settings.idle_timeout_s,
    )
    record_worker_events(worker, session)
    if navigator is not None and llm is not None:
        # Flows owns the engage LLM's context and tools, node by node.
        navigator.engage_with(FlowManager(llm=llm, context_aggregator=aggregators, worker=worker))
    initial_frames: list[Frame] = []
    if greeting is None and greeting_text:
        # Not pre-rendered in time: synthesize it live, first thing after start.
        session.log.event("greeting", prerendered=False)
        initial_frames.append(TTSSpeakFrame(greeting_text))
    return CallPipeline(
        worker=worker, recorder=recorder, recording=recording, controller=controller,
        initial_frames=initial_frames, extractor=world_extractor,
    )


def observer_processors(
    session: CallSession, settings: Settings, director: DirectorBackend,
    safety: SafetyServices, safety_index: ConceptIndex | None = None,
    time_limit: TimeLimitPolicy = DEFAULT_TIME_LIMIT, can_regenerate: bool = False,
) -> IntelligenceLayers:
    """The conversation observers (seeds 000, 003): beside the STT, the quick observer
    (signals, programmatic goodbye), the safety monitor, the director (advice from the
    side) and the silence monitor; before the navigator, the agent gate (a suspended
    agent answers nothing, a stale turn is not answered); after the LLM, the reply guard
    (a reply made stale by newer words is not played), the guidance stripper and the
    silent-reply watchdog (an answer never heard: one retry, then a fallback line;
    `can_regenerate`: an engage LLM can be asked again)."""
    quick = QuickObserver(session, goodbye_delay_s=settings.goodbye_delay_s,
                          emergency_number=settings.emergency_number)
    monitor = SafetyMonitor(
        session, safety, escalate_at=settings.safety_escalate_similarity,
        candidate_at=settings.safety_candidate_similarity,
        judge_timeout_s=settings.safety_judge_timeout_s,
        emergency_number=settings.emergency_number, crisis_resources=settings.crisis_resources,
        transfer_number=settings.human_transfer_number, index=safety_index,
    )
    director_layer = ConversationDirector(
        session, director, timeout_s=settings.director_timeout_s,
        wind_down_s=settings.director_wind_down_s, force_end_s=settings.director_force_end_s,
        closing_end_s=settings.director_closing_end_s, time_limit=time_limit,
        transfer_number=settings.human_transfer_number,
    )
    silence = SilenceMonitor(session, schedule=SilenceSchedule(
        checkins_s=tuple(settings.silence_checkins_s),
        goodbye_after_s=settings.silence_goodbye_after_s,
    ))
    return IntelligenceLayers(before_context=[quick, monitor, director_layer, silence],
                              before_llm=[AgentGate(
                                  session, transfer_number=settings.human_transfer_number)],
                              after_llm=[ReplyGuard(session), GuidanceStripper(session),
                                         SilentReplyWatchdog(
                                             session, bound_s=settings.reply_watchdog_s,
                                             can_regenerate=can_regenerate)])


def emotion_processors(
    session: CallSession, providers: EmotionProviders, overrides: ServiceOverrides,
    tts: TTSService,
) -> IntelligenceLayers:
    """The emotion layers, when the workspace has emotion on: the tap beside STT, steering
    before the navigator, the voice tone just before the TTS. A text session has no
    audio to hear, so its words alone are scored."""
    emotion = session.emotion
    if emotion is None:
        return IntelligenceLayers()
    audio = overrides.emotion_audio
    if audio is None:
        audio = providers.audio() if session.is_audio else LocalAudioProvider()
    tap = EmotionTap(session, emotion, audio=audio,
                     text=overrides.emotion_text or providers.text)
    steering = EmotionSteering(session, emotion)
    tone = ToneController(session, emotion, tts_settings=tone_settings_of(tts))
    return IntelligenceLayers(before_context=[tap], before_llm=[steering], after_llm=[tone])


def record_worker_events(worker: PipelineWorker, session: CallSession) -> None:
    """Why the worker ended a call by itself (silence, a fatal error) goes into the record.

    The errors themselves are `pipeline_error` events from the call recorder.
    """

    @worker.event_handler("on_idle_timeout")
    async def _on_idle(_worker) -> None:
        session.log.event("idle_timeout")
        if session.completion_reason is None:
            session.completion_reason = CompletionReason.IDLE_TIMEOUT

    @worker.event_handler("on_pipeline_error")
    async def _on_error(_worker, frame: ErrorFrame) -> None:
        if frame.fatal and session.completion_reason is None:
            session.completion_reason = CompletionReason.PIPELINE_ERROR


async def bot(runner_args) -> None:
    """Pipecat development runner entry point (`python bot.py -t webrtc|daily|twilio`)."""
    from runner.dev_runner import run_dev_session

    await run_dev_session(runner_args)


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
