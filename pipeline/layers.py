"""The intelligence layers between STT and TTS, feature by feature.

Each layer puts its processors in three places of the pipeline, each list in pipeline
order: beside the STT (`before_context`: they see every caller transcript first),
between the user aggregator and the engage LLM (`before_llm`) and between the LLM and
the TTS (`after_llm`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.tts_service import TTSService

from call.call_session import CallSession
from pipeline.call_deps import CallDeps
from pipeline.providers import EmotionProviders
from processors.call_control.reply_watchdog_processor import ReplyWatchdogProcessor
from processors.conversation.agent_gate_processor import AgentGateProcessor
from processors.conversation.conversation_director_processor import ConversationDirectorProcessor
from processors.conversation.director import LocalDirector
from processors.conversation.guidance_stripper_processor import GuidanceStripperProcessor
from processors.conversation.quick_observer_processor import QuickObserverProcessor
from processors.conversation.reply_guard_processor import ReplyGuardProcessor
from processors.conversation.silence_monitor_processor import SilenceMonitorProcessor
from processors.conversation.silence_schedule import SilenceSchedule
from processors.conversation.time_limit import DEFAULT_TIME_LIMIT
from processors.emotion.emotion_steering_processor import EmotionSteeringProcessor
from processors.emotion.emotion_tap_processor import EmotionTapProcessor
from processors.emotion.tone_controller_processor import ToneControllerProcessor, tone_settings_of
from processors.safety.judge import RulesJudge
from processors.safety.monitor import SafetyServices
from processors.safety.safety_monitor_processor import SafetyMonitorProcessor
from services.embeddings import LocalEmbedder
from services.prosody.emotion import LocalAudioProvider


@dataclass
class Layer:
    """One feature's processors, at the three places of the pipeline."""

    before_context: list[FrameProcessor] = field(default_factory=list)
    before_llm: list[FrameProcessor] = field(default_factory=list)
    after_llm: list[FrameProcessor] = field(default_factory=list)


def conversation_layer(session: CallSession, deps: CallDeps, *, can_regenerate: bool) -> Layer:
    """The conversation observers and the safety monitor: beside the STT, the quick
    observer (signals, programmatic goodbye), the safety monitor, the director (advice
    from the side) and the silence monitor; before the navigator, the agent gate (a
    suspended agent answers nothing, a stale turn is not answered); after the LLM, the
    reply guard (a reply made stale by newer words is not played), the guidance stripper
    and the silent-reply watchdog (an answer never heard: one retry, then a fallback
    line; `can_regenerate`: an engage LLM can be asked again)."""
    settings = deps.settings
    safety = deps.safety or SafetyServices(embedder=LocalEmbedder(), judge=RulesJudge())
    time_limit = deps.engine.graph.time_limit if deps.engine is not None else DEFAULT_TIME_LIMIT
    quick = QuickObserverProcessor(session, goodbye_delay_s=settings.conversation.goodbye_delay_s,
                          emergency_number=settings.safety.emergency_number)
    monitor = SafetyMonitorProcessor(
        session, safety, escalate_at=settings.safety.escalate_similarity,
        candidate_at=settings.safety.candidate_similarity,
        judge_timeout_s=settings.safety.judge_timeout_s,
        emergency_number=settings.safety.emergency_number,
        crisis_resources=settings.safety.crisis_resources,
        transfer_number=settings.telephony.human_transfer_number, index=deps.safety_index,
    )
    director = ConversationDirectorProcessor(
        session, deps.director or LocalDirector(),
        timeout_s=settings.conversation.director_timeout_s,
        wind_down_s=settings.conversation.director_wind_down_s,
        force_end_s=settings.conversation.director_force_end_s,
        closing_end_s=settings.conversation.director_closing_end_s, time_limit=time_limit,
        transfer_number=settings.telephony.human_transfer_number, call_backs=deps.call_backs,
    )
    silence = SilenceMonitorProcessor(session, schedule=SilenceSchedule(
        checkins_s=tuple(settings.conversation.silence_checkins_s),
        goodbye_after_s=settings.conversation.silence_goodbye_after_s,
    ))
    return Layer(
        before_context=[quick, monitor, director, silence],
        before_llm=[AgentGateProcessor(
            session, transfer_number=settings.telephony.human_transfer_number)],
        after_llm=[ReplyGuardProcessor(session), GuidanceStripperProcessor(session),
                   ReplyWatchdogProcessor(session, bound_s=settings.turns.reply_watchdog_s,
                                       can_regenerate=can_regenerate)],
    )


def emotion_layer(session: CallSession, deps: CallDeps, tts: TTSService) -> Layer:
    """The emotion layers, when the workspace has emotion on: the tap beside STT, steering
    before the navigator, the voice tone just before the TTS. A text session has no
    audio to hear, so its words alone are scored."""
    emotion = deps.emotion
    if emotion is None:
        return Layer()
    providers = deps.emotion_providers or EmotionProviders.local()
    audio = deps.overrides.emotion_audio
    if audio is None:
        audio = providers.audio() if session.is_audio else LocalAudioProvider()
    tap = EmotionTapProcessor(session, emotion, audio=audio,
                     text=deps.overrides.emotion_text or providers.text)
    steering = EmotionSteeringProcessor(session, emotion)
    tone = ToneControllerProcessor(session, emotion, tts_settings=tone_settings_of(tts))
    return Layer(before_context=[tap], before_llm=[steering], after_llm=[tone])
