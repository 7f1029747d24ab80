"""Everything one call's pipeline is built from, besides its transport and session.

Made in one place for production calls (`AppRuntime.call_deps`, used by phone, text
and development-runner calls alike), so no entry path can leave a layer's provider
out; tests and benchmarks build it directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService

from config import Settings
from db.call_backs import CallBacks
from flows.graph_engine import GraphEngine
from pipeline.providers import EmotionProviders, ProviderPlan
from processors.conversation.director import DirectorBackend
from processors.emotion.call_emotion import CallEmotion
from processors.safety.concepts import ConceptIndex
from processors.safety.monitor import SafetyServices
from processors.voice.greeting_player_processor import PrerenderedSpeech
from processors.world.audio_check import AudioVerifier
from processors.world.extraction import Extractor
from services.emotion.provider import AudioEmotionProvider, TextEmotionProvider
from services.twilio import PHONE_SAMPLE_RATE


@dataclass(frozen=True)
class ServiceOverrides:
    """Replace providers (tests and benchmarks use instant fakes; production never does)."""

    stt: STTService | None = None
    tts: TTSService | None = None
    llm: LLMService | None = None
    llm_available: bool | None = None
    emotion_audio: AudioEmotionProvider | None = None
    emotion_text: TextEmotionProvider | None = None


@dataclass(frozen=True)
class CallDeps:
    """The process's services and this call's own parts that the pipeline is built from.

    `emotion` is the call's emotional state (None: emotion is off for the workspace);
    `engine` its context-graph engine (None: static prompt mode); `call_backs` how the
    pipeline's own layers (the no-LLM responder, the time limit) ask for a call back
    (None: no call back can be arranged, so none is offered). Left as None, the
    director, safety services and extractor fall back to their offline engines.
    """

    settings: Settings
    plan: ProviderPlan
    engine: GraphEngine | None = None
    emotion: CallEmotion | None = None
    greeting: PrerenderedSpeech | None = None
    greeting_text: str | None = None
    recordings_dir: Path | None = None
    sample_rate: int = PHONE_SAMPLE_RATE
    emotion_providers: EmotionProviders | None = None
    director: DirectorBackend | None = None
    safety: SafetyServices | None = None
    safety_index: ConceptIndex | None = None
    extractor: Extractor | None = None
    audio_verifier: AudioVerifier | None = None
    call_backs: CallBacks | None = None
    overrides: ServiceOverrides = ServiceOverrides()
