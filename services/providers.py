"""Builds the STT, TTS and LLM services for a call from the settings.

Cloud providers are Pipecat's own services; local ones are real engines
(PocketSphinx, eSpeak NG). With no LLM the fallback responder answers (see
processors/fallback_responder.py), so a call is never silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language

from config import ProviderChoice, Settings, resolve_providers
from flows.llm_navigator import NAV_CHOICE_SCHEMA, DecisionModel
from services.prompts import render_prompt
from services.voice_settings import VoiceSettings

# Calls one process carries by default, a margin below what bench/pipeline_latency.py
# measured on 2 vCPUs (docs/PERFORMANCE.md): 60 calls with cloud voices (the event
# loop is the limit), 15 to 20 with PocketSphinx and eSpeak NG on the same CPUs.
CLOUD_VOICES_CALL_CAPACITY = 50
LOCAL_VOICES_CALL_CAPACITY = 12

NAVIGATOR_INSTRUCTION = render_prompt("navigator/system.md")
NAVIGATOR_MAX_TOKENS = 120


@dataclass(frozen=True)
class ProviderPlan:
    """The providers chosen once at start-up; every call uses the same plan."""

    stt: ProviderChoice
    tts: ProviderChoice
    llm: ProviderChoice
    navigator: ProviderChoice

    @classmethod
    def from_settings(cls, settings: Settings) -> ProviderPlan:
        choices = resolve_providers(settings)
        return cls(stt=choices["stt"], tts=choices["tts"], llm=choices["llm"],
                   navigator=choices["navigator"])

    def log(self) -> None:
        """One line per component: which provider and why (never the key itself)."""
        for choice in (self.stt, self.tts, self.llm, self.navigator):
            logger.info(f"provider {choice.component}: {choice.provider} ({choice.reason})")

    def snapshot(self) -> dict[str, str]:
        return {"stt": self.stt.provider, "tts": self.tts.provider, "llm": self.llm.provider,
                "navigator": self.navigator.provider}

    def call_capacity(self, settings: Settings) -> int:
        """MAX_CONCURRENT_CALLS when set, else the measured default for these voices."""
        if settings.max_concurrent_calls is not None:
            return settings.max_concurrent_calls
        if "local" in (self.stt.provider, self.tts.provider):
            return LOCAL_VOICES_CALL_CAPACITY
        return CLOUD_VOICES_CALL_CAPACITY

    @property
    def has_llm(self) -> bool:
        return self.llm.provider != "local"

    def tts_identity(self, settings: Settings, voice: VoiceSettings) -> str:
        """What makes a rendering reusable: provider, voice and speed."""
        if self.tts.provider == "elevenlabs":
            return f"elevenlabs:{voice.voice_id or settings.elevenlabs_voice_id}:{voice.speed}"
        return f"espeak:{settings.local_tts_voice}:{settings.local_tts_words_per_minute}:{voice.speed}"


def build_stt(plan: ProviderPlan, settings: Settings, keyterms: list[str]) -> STTService:
    """Speech-to-text with the call's merged keyterms."""
    if plan.stt.provider == "deepgram":
        from pipecat.services.deepgram.stt import DeepgramSTTService

        return DeepgramSTTService(
            api_key=settings.deepgram_api_key.get_secret_value(),
            base_url=settings.deepgram_base_url or "",
            settings=DeepgramSTTService.Settings(
                model=settings.deepgram_model,
                language=Language.EN_US,
                keyterm=keyterms or None,
                smart_format=True,
                interim_results=True,
                endpointing=300,
                utterance_end_ms=1000,
            ),
        )
    from services.local_stt import PocketSphinxSTTService

    return PocketSphinxSTTService(keyterms=keyterms)


def build_tts(plan: ProviderPlan, settings: Settings, voice: VoiceSettings) -> TTSService:
    """Text-to-speech at the workspace's voice and speed."""
    if plan.tts.provider == "elevenlabs":
        from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

        return ElevenLabsTTSService(
            api_key=settings.elevenlabs_api_key.get_secret_value(),
            url=settings.elevenlabs_url,
            settings=ElevenLabsTTSService.Settings(
                voice=voice.voice_id or settings.elevenlabs_voice_id,
                model=settings.elevenlabs_model,
                speed=voice.speed,
            ),
        )
    from services.local_tts import EspeakTTSService

    return EspeakTTSService(
        settings=EspeakTTSService.Settings(voice=settings.local_tts_voice, speed=voice.speed),
        base_words_per_minute=settings.local_tts_words_per_minute,
    )


def build_llm(plan: ProviderPlan, settings: Settings, system_instruction: str) -> LLMService | None:
    """The engage LLM, or None when the fallback responder must answer."""
    if plan.llm.provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pipecat.services.anthropic.llm import AnthropicLLMService

        api_key = settings.anthropic_api_key.get_secret_value()
        return AnthropicLLMService(
            api_key=api_key,
            client=AsyncAnthropic(api_key=api_key, base_url=settings.anthropic_base_url),
            settings=AnthropicLLMService.Settings(
                model=settings.anthropic_model, system_instruction=system_instruction
            ),
        )
    if plan.llm.provider == "openai":
        from pipecat.services.openai.llm import OpenAILLMService

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "none"
        return OpenAILLMService(
            api_key=key,
            base_url=settings.openai_base_url,
            settings=OpenAILLMService.Settings(
                model=settings.openai_model, system_instruction=system_instruction
            ),
        )
    return None


def build_navigator_model(plan: ProviderPlan, settings: Settings) -> DecisionModel | None:
    """The fast model the LLM navigator asks (one per process), or None: deterministic rules.

    It is a Pipecat LLM service used out of band (`run_inference`), never placed in a
    pipeline: one HTTP client serves every call, and the provider enforces the answer's
    JSON schema where it can (the navigator validates it either way).
    """
    if plan.navigator.provider == "google":
        from google.genai.types import HttpOptions
        from pipecat.services.google.llm import GoogleLLMService

        service: LLMService = GoogleLLMService(
            api_key=settings.google_api_key.get_secret_value(),
            http_options=HttpOptions(base_url=settings.google_base_url)
            if settings.google_base_url else None,
            settings=GoogleLLMService.Settings(
                model=settings.google_navigator_model, system_instruction=NAVIGATOR_INSTRUCTION,
            ),
        )
    elif plan.navigator.provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pipecat.services.anthropic.llm import AnthropicLLMService

        api_key = settings.anthropic_api_key.get_secret_value()
        service = AnthropicLLMService(
            api_key=api_key,
            client=AsyncAnthropic(api_key=api_key, base_url=settings.anthropic_base_url),
            settings=AnthropicLLMService.Settings(
                model=settings.anthropic_navigator_model, system_instruction=NAVIGATOR_INSTRUCTION,
            ),
        )
    else:
        return None

    async def decide(prompt: str) -> str:
        context = LLMContext(messages=[{"role": "user", "content": prompt}])
        answer = await service.run_inference(
            context, max_tokens=NAVIGATOR_MAX_TOKENS, response_schema=NAV_CHOICE_SCHEMA
        )
        return answer or ""

    return decide
