"""Builds the STT, TTS, LLM and emotion providers for a call from the settings.

Cloud providers are Pipecat's own services; local ones are real engines
(PocketSphinx, eSpeak NG). With no LLM the fallback responder answers (see
processors/call_control/fallback_responder_processor.py), so a call is never silent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loguru import logger
from pipecat.pipeline.service_switcher import ServiceSwitcher
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language

from analysis.analyst import Analyst, ModelAnalyst, RulesAnalyst, answer_schema
from analysis.memories import (
    MemoryExtractor,
    ModelMemoryExtractor,
    RulesMemoryExtractor,
    memory_schema,
)
from call.voice_settings import VoiceSettings
from config import Settings
from flows.llm_navigator import NAV_CHOICE_SCHEMA, DecisionModel
from lib.prompts import render_prompt
from pipeline.provider_choice import ProviderChoice, resolve_providers
from processors.conversation.director import MAX_TOKENS as DIRECTOR_MAX_TOKENS
from processors.conversation.director import (
    DirectorBackend,
    LocalDirector,
    ModelDirector,
    director_lines,
    director_schema,
)
from processors.safety.judge import INSTRUCTION as JUDGE_INSTRUCTION
from processors.safety.judge import JUDGE_SCHEMA, ModelJudge, RulesJudge, SafetyJudge
from processors.safety.judge import MAX_TOKENS as JUDGE_MAX_TOKENS
from processors.safety.monitor import SafetyServices
from processors.world.audio_check import AudioVerifier, LocalAudioVerifier
from processors.world.extraction import (
    Extractor,
    ModelExtractor,
    RulesExtractor,
    extraction_schema,
)
from processors.world.verification import SCHEMAS as VERIFICATION_SCHEMAS
from processors.world.verification import Judges, ModelJudges, RulesJudges
from services.embeddings import Embedder, LocalEmbedder, OpenAIEmbedder
from services.emotion.provider import AudioEmotionProvider, TextEmotionProvider
from services.prosody.emotion import LocalAudioProvider
from services.provider_faults import FaultSink, ReconnectPolicy, ignore_faults
from services.vader.emotion import LocalTextProvider

# Calls one process carries by default, a margin below what bench/pipeline_latency.py
# measured on 2 vCPUs (docs/PERFORMANCE.md): 60 calls with cloud voices on the Intel
# reference of 2026-11-24, 40 on the AMD EPYC one of 2026-11-25 (the event loop is the
# limit; the emotion layers measured no different at 40), 15 to 20 with PocketSphinx and
# eSpeak NG on the same CPUs.
CLOUD_VOICES_CALL_CAPACITY = 40
LOCAL_VOICES_CALL_CAPACITY = 12

NAVIGATOR_INSTRUCTION = render_prompt("navigator/system.md")
NAVIGATOR_MAX_TOKENS = 120
EXTRACTION_INSTRUCTION = render_prompt("world/system.md")
EXTRACTION_MAX_TOKENS = 200
VERIFICATION_INSTRUCTION = EXTRACTION_INSTRUCTION
VERIFICATION_MAX_TOKENS = 300
ANALYSIS_INSTRUCTION = render_prompt("analysis/system.md")
ANALYSIS_MAX_TOKENS = 1500
MEMORY_INSTRUCTION = render_prompt("analysis/memories_system.md")
MEMORY_MAX_TOKENS = 800


@dataclass(frozen=True)
class ProviderPlan:
    """The providers chosen once at start-up; every call uses the same plan."""

    stt: ProviderChoice
    tts: ProviderChoice
    llm: ProviderChoice
    navigator: ProviderChoice
    emotion_audio: ProviderChoice
    emotion_text: ProviderChoice
    director: ProviderChoice
    safety_judge: ProviderChoice
    embeddings: ProviderChoice
    world_model: ProviderChoice
    audio_verification: ProviderChoice

    @classmethod
    def from_settings(cls, settings: Settings) -> ProviderPlan:
        return cls(**resolve_providers(settings))

    def choices(self) -> tuple[ProviderChoice, ...]:
        return (self.stt, self.tts, self.llm, self.navigator, self.emotion_audio,
                self.emotion_text, self.director, self.safety_judge, self.embeddings,
                self.world_model, self.audio_verification)

    def log(self) -> None:
        """One line per component: which provider and why (never the key itself)."""
        for choice in self.choices():
            logger.info(f"provider {choice.component}: {choice.provider} ({choice.reason})")

    def snapshot(self) -> dict[str, str]:
        return {choice.component: choice.provider for choice in self.choices()}

    def call_capacity(self, settings: Settings) -> int:
        """MAX_CONCURRENT_CALLS when set, else the measured default for these voices."""
        if settings.server.max_concurrent_calls is not None:
            return settings.server.max_concurrent_calls
        if "local" in (self.stt.provider, self.tts.provider):
            return LOCAL_VOICES_CALL_CAPACITY
        return CLOUD_VOICES_CALL_CAPACITY

    @property
    def has_llm(self) -> bool:
        return self.llm.provider != "local"

    def tts_identity(self, settings: Settings, voice: VoiceSettings) -> str:
        """What makes a rendering reusable: provider, voice and speed."""
        providers = settings.providers
        if self.tts.provider == "elevenlabs":
            return f"elevenlabs:{voice.voice_id or providers.elevenlabs_voice_id}:{voice.speed}"
        return (f"espeak:{providers.local_tts_voice}:{providers.local_tts_words_per_minute}"
                f":{voice.speed}")


def build_stt(
    plan: ProviderPlan, settings: Settings, keyterms: list[str],
    faults: FaultSink = ignore_faults,
) -> STTService | ServiceSwitcher:
    """Speech-to-text with the call's merged keyterms. Deepgram's stream is reopened when
    it fails (each fault goes to `faults`) and the offline recognizer stands by."""
    if plan.stt.provider == "deepgram":
        from pipeline.stt_failover import with_offline_standby
        from services.deepgram.reconnecting_stt import ReconnectingDeepgramSTTService

        providers = settings.providers
        deepgram = ReconnectingDeepgramSTTService(
            policy=ReconnectPolicy(tries=providers.stt_reconnect_tries,
                                   first_delay_s=providers.provider_reconnect_first_wait_s),
            final_timeout_s=providers.stt_final_timeout_s,
            faults=faults,
            api_key=settings.providers.deepgram_api_key.get_secret_value(),
            base_url=settings.providers.deepgram_base_url or "",
            settings=ReconnectingDeepgramSTTService.Settings(
                model=settings.providers.deepgram_model,
                language=Language.EN_US,
                keyterm=keyterms or None,
                smart_format=True,
                interim_results=True,
                endpointing=300,
                utterance_end_ms=1000,
            ),
        )
        return with_offline_standby(deepgram, keyterms)
    from services.pocketsphinx.stt import PocketSphinxSTTService

    return PocketSphinxSTTService(keyterms=keyterms)


def build_tts(
    plan: ProviderPlan, settings: Settings, voice: VoiceSettings,
    faults: FaultSink = ignore_faults,
) -> TTSService:
    """Text-to-speech at the workspace's voice and speed. A sentence ElevenLabs cannot
    finish (a dropped stream, a first byte that does not come) is said in the local voice
    (each fault goes to `faults`)."""
    providers = settings.providers
    if plan.tts.provider == "elevenlabs":
        from services.elevenlabs.fallback_tts import (
            FallbackElevenLabsTTSService,
            LocalVoice,
        )
        from services.espeak.tts import words_per_minute_for

        return FallbackElevenLabsTTSService(
            local_voice=LocalVoice(providers.local_tts_voice, words_per_minute_for(
                voice.speed, providers.local_tts_words_per_minute)),
            first_byte_timeout_s=providers.tts_first_byte_timeout_s,
            reconnect_wait_s=providers.tts_reconnect_wait_s,
            reconnect_backoff_min_wait=providers.provider_reconnect_first_wait_s,
            faults=faults,
            api_key=settings.providers.elevenlabs_api_key.get_secret_value(),
            url=settings.providers.elevenlabs_url,
            settings=FallbackElevenLabsTTSService.Settings(
                voice=voice.voice_id or settings.providers.elevenlabs_voice_id,
                model=settings.providers.elevenlabs_model,
                speed=voice.speed,
            ),
        )
    from services.espeak.tts import EspeakTTSService

    return EspeakTTSService(
        settings=EspeakTTSService.Settings(
            voice=settings.providers.local_tts_voice, speed=voice.speed, volume=voice.volume
        ),
        base_words_per_minute=settings.providers.local_tts_words_per_minute,
    )


def build_llm(plan: ProviderPlan, settings: Settings, system_instruction: str) -> LLMService | None:
    """The engage LLM, or None when the fallback responder must answer."""
    if plan.llm.provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pipecat.services.anthropic.llm import AnthropicLLMService

        api_key = settings.providers.anthropic_api_key.get_secret_value()
        return AnthropicLLMService(
            api_key=api_key,
            client=AsyncAnthropic(api_key=api_key, base_url=settings.providers.anthropic_base_url),
            settings=AnthropicLLMService.Settings(
                model=settings.providers.anthropic_model, system_instruction=system_instruction
            ),
        )
    if plan.llm.provider == "openai":
        from pipecat.services.openai.llm import OpenAILLMService

        openai_key = settings.providers.openai_api_key
        key = openai_key.get_secret_value() if openai_key else "none"
        return OpenAILLMService(
            api_key=key,
            base_url=settings.providers.openai_base_url,
            settings=OpenAILLMService.Settings(
                model=settings.providers.openai_model, system_instruction=system_instruction
            ),
        )
    return None


# A structured side call to a fast model: prompt in, JSON text out.
StructuredModel = Callable[[str], Awaitable[str]]


def build_fast_llm(provider: str, settings: Settings) -> LLMService | None:
    """Gemini Flash or Claude Haiku as a Pipecat service used out of band
    (`run_inference`), never placed in a pipeline: one HTTP client serves every call."""
    if provider == "google":
        from google.genai.types import HttpOptions
        from pipecat.services.google.llm import GoogleLLMService

        return GoogleLLMService(
            api_key=settings.providers.google_api_key.get_secret_value(),
            http_options=HttpOptions(base_url=settings.providers.google_base_url)
            if settings.providers.google_base_url else None,
            settings=GoogleLLMService.Settings(
                model=settings.providers.google_navigator_model,
                system_instruction=NAVIGATOR_INSTRUCTION,
            ),
        )
    if provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pipecat.services.anthropic.llm import AnthropicLLMService

        api_key = settings.providers.anthropic_api_key.get_secret_value()
        return AnthropicLLMService(
            api_key=api_key,
            client=AsyncAnthropic(api_key=api_key, base_url=settings.providers.anthropic_base_url),
            settings=AnthropicLLMService.Settings(
                model=settings.providers.anthropic_navigator_model,
                system_instruction=NAVIGATOR_INSTRUCTION,
            ),
        )
    return None


def structured_model(
    service: LLMService, *, instruction: str, schema: dict, max_tokens: int
) -> StructuredModel:
    """One question to the fast model whose answer the provider holds to `schema` where
    it can (the caller validates it either way)."""

    async def ask(prompt: str) -> str:
        context = LLMContext(messages=[{"role": "user", "content": prompt}])
        answer = await service.run_inference(
            context, max_tokens=max_tokens, system_instruction=instruction,
            response_schema=schema,
        )
        return answer or ""

    return ask


def build_navigator_model(plan: ProviderPlan, settings: Settings) -> DecisionModel | None:
    """The fast model the LLM navigator asks (one per process), or None: deterministic rules."""
    service = build_fast_llm(plan.navigator.provider, settings)
    if service is None:
        return None
    return structured_model(service, instruction=NAVIGATOR_INSTRUCTION,
                            schema=NAV_CHOICE_SCHEMA, max_tokens=NAVIGATOR_MAX_TOKENS)


@dataclass(frozen=True)
class EmotionProviders:
    """Each call's emotion providers as the plan chose them: a Hume session per call (one
    persistent connection each), and the text provider, which keeps no per-call state
    and so is shared (its fast model holds one HTTP client for every call)."""

    text: TextEmotionProvider
    hume_api_key: str | None = None
    hume_base_url: str | None = None

    def audio(self) -> AudioEmotionProvider:
        if self.hume_api_key is None:
            return LocalAudioProvider()
        from services.hume.emotion import HumeAudioProvider

        return HumeAudioProvider(self.hume_api_key, base_url=self.hume_base_url)

    @classmethod
    def local(cls) -> EmotionProviders:
        return cls(text=LocalTextProvider())


def build_emotion_providers(plan: ProviderPlan, settings: Settings) -> EmotionProviders:
    """Hume for how the caller sounds and the fast model for their words, each when its
    key is set; else the offline analyzers."""
    text: TextEmotionProvider = LocalTextProvider()
    service = build_fast_llm(plan.emotion_text.provider, settings)
    if service is not None:
        from services.llm.emotion import (
            INSTRUCTION,
            MAX_TOKENS,
            LLMTextProvider,
            language_schema,
        )

        text = LLMTextProvider(
            structured_model(service, instruction=INSTRUCTION, schema=language_schema(),
                             max_tokens=MAX_TOKENS),
            timeout_s=settings.emotion.text_timeout_s,
        )
    hume_key = None
    if plan.emotion_audio.provider == "hume":
        hume_key = settings.providers.hume_api_key.get_secret_value()
    return EmotionProviders(text=text, hume_api_key=hume_key,
                            hume_base_url=settings.providers.hume_base_url)


def build_director(plan: ProviderPlan, settings: Settings) -> DirectorBackend:
    """The conversation director every call shares: the fast model when its key is set,
    else the rules."""
    service = build_fast_llm(plan.director.provider, settings)
    if service is None:
        return LocalDirector()
    ask = structured_model(service, instruction=director_lines().instruction,
                           schema=director_schema(), max_tokens=DIRECTOR_MAX_TOKENS)
    return ModelDirector(ask, timeout_s=settings.conversation.director_timeout_s)


def build_safety(plan: ProviderPlan, settings: Settings) -> SafetyServices:
    """The safety monitor's embedder and judge, shared by every call."""
    embedder: Embedder = LocalEmbedder()
    if plan.embeddings.provider == "openai":
        embedder = OpenAIEmbedder(settings.providers.openai_api_key.get_secret_value(),
                                  base_url=settings.providers.openai_base_url,
                                  timeout_s=settings.safety.judge_timeout_s)
    judge: SafetyJudge = RulesJudge()
    service = build_fast_llm(plan.safety_judge.provider, settings)
    if service is not None:
        judge = ModelJudge(
            structured_model(service, instruction=JUDGE_INSTRUCTION, schema=JUDGE_SCHEMA,
                             max_tokens=JUDGE_MAX_TOKENS),
            timeout_s=settings.safety.judge_timeout_s,
        )
    return SafetyServices(embedder=embedder, judge=judge)


def build_extractor(plan: ProviderPlan, settings: Settings) -> Extractor:
    """What captures facts from each caller turn: the fast model, else the rules."""
    rules = RulesExtractor(country_code=settings.world.phone_country_code)
    service = build_fast_llm(plan.world_model.provider, settings)
    if service is None:
        return rules
    ask = structured_model(service, instruction=EXTRACTION_INSTRUCTION,
                           schema=extraction_schema(), max_tokens=EXTRACTION_MAX_TOKENS)
    return ModelExtractor(ask, timeout_s=settings.world.extraction_timeout_s,
                          country_code=settings.world.phone_country_code, fallback=rules)


def build_memory_extractor(plan: ProviderPlan, settings: Settings) -> MemoryExtractor:
    """What a finished call leaves to remember: the world model's fast model, held to the
    caller's words (the rules when it fails), else the rules."""
    rules = RulesMemoryExtractor()
    service = build_fast_llm(plan.world_model.provider, settings)
    if service is None:
        return rules
    ask = structured_model(service, instruction=MEMORY_INSTRUCTION, schema=memory_schema(),
                           max_tokens=MEMORY_MAX_TOKENS)
    return ModelMemoryExtractor(ask, timeout_s=settings.memory.extraction_timeout_s,
                                name=f"model:{plan.world_model.provider}", fallback=rules)


def build_verifier(plan: ProviderPlan, settings: Settings) -> Judges:
    """The after-call judges: the fast model at each stage (never looser than the rules),
    else the rules alone."""
    service = build_fast_llm(plan.world_model.provider, settings)
    if service is None:
        return RulesJudges()
    asks = {stage: structured_model(service, instruction=VERIFICATION_INSTRUCTION,
                                    schema=schema, max_tokens=VERIFICATION_MAX_TOKENS)
            for stage, schema in VERIFICATION_SCHEMAS.items()}
    return ModelJudges(asks, timeout_s=settings.world.verification_timeout_s)


def build_analyst(plan: ProviderPlan, settings: Settings) -> Analyst:
    """The after-call analyst: the fast model over the rules, else the rules alone."""
    service = build_fast_llm(plan.world_model.provider, settings)
    if service is None:
        return RulesAnalyst()
    ask = structured_model(service, instruction=ANALYSIS_INSTRUCTION, schema=answer_schema(),
                           max_tokens=ANALYSIS_MAX_TOKENS)
    return ModelAnalyst(ask, provider=plan.world_model.provider,
                        timeout_s=settings.world.analysis_timeout_s)


def build_audio_verifier(plan: ProviderPlan, settings: Settings) -> AudioVerifier:
    """Who hears a caller's structured answers again: Gemini (audio in), else a second
    PocketSphinx pass held to the field's grammar."""
    if plan.audio_verification.provider == "google":
        from processors.world.audio_check import GeminiAudioVerifier

        return GeminiAudioVerifier(
            settings.providers.google_api_key.get_secret_value(),
            model=settings.providers.google_navigator_model,
            base_url=settings.providers.google_base_url,
            timeout_s=settings.world.audio_verification_timeout_s,
            country_code=settings.world.phone_country_code)
    from processors.world.field_grammar import FieldRecognizer

    return LocalAudioVerifier(FieldRecognizer.shared(),
                              timeout_s=settings.world.audio_verification_timeout_s,
                              country_code=settings.world.phone_country_code)
