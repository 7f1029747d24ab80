"""Which provider each component uses, decided once from the settings.

`auto` takes the cloud provider when its key is set, else the local engine, so the
service runs with no keys at all; a cloud provider asked for by name without its key
is a clear error at start-up. pipeline/providers.py builds what is chosen here.
"""

from __future__ import annotations

from dataclasses import dataclass

from config import Settings


@dataclass(frozen=True)
class ProviderChoice:
    """Which provider a component uses, and why (logged once at start-up)."""

    component: str
    provider: str
    reason: str


def _choose(
    component: str, requested: str, cloud: str, cloud_ready: bool, key_name: str
) -> ProviderChoice:
    if requested == "auto":
        if cloud_ready:
            return ProviderChoice(component, cloud, f"auto: {key_name} is set")
        return ProviderChoice(component, "local", f"auto: {key_name} is not set")
    if requested == cloud and not cloud_ready:
        raise ValueError(f"{component.upper()}_PROVIDER={cloud} needs {key_name}")
    return ProviderChoice(component, requested, f"{component.upper()}_PROVIDER={requested}")


def resolve_providers(settings: Settings) -> dict[str, ProviderChoice]:
    """Decide every component's provider from the settings."""
    providers = settings.providers
    stt = _choose(
        "stt", providers.stt, "deepgram", providers.deepgram_api_key is not None,
        "DEEPGRAM_API_KEY",
    )
    tts = _choose(
        "tts", providers.tts, "elevenlabs", providers.elevenlabs_api_key is not None,
        "ELEVENLABS_API_KEY",
    )
    if providers.llm == "auto":
        if providers.anthropic_api_key is not None:
            llm = ProviderChoice("llm", "anthropic", "auto: ANTHROPIC_API_KEY is set")
        elif providers.openai_api_key is not None or providers.openai_base_url:
            llm = ProviderChoice("llm", "openai", "auto: OPENAI_API_KEY/OPENAI_BASE_URL is set")
        else:
            llm = ProviderChoice(
                "llm", "local", "auto: no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL"
            )
    elif providers.llm == "anthropic":
        llm = _choose("llm", "anthropic", "anthropic", providers.anthropic_api_key is not None,
                      "ANTHROPIC_API_KEY")
    elif providers.llm == "openai":
        ready = providers.openai_api_key is not None or bool(providers.openai_base_url)
        llm = _choose("llm", "openai", "openai", ready, "OPENAI_API_KEY or OPENAI_BASE_URL")
    else:
        llm = ProviderChoice("llm", "local", "LLM_PROVIDER=local")
    emotion_audio = _choose(
        "emotion_audio", providers.emotion_audio, "hume",
        providers.hume_api_key is not None, "HUME_API_KEY",
    )
    return {
        "stt": stt, "tts": tts, "llm": llm,
        "navigator": fast_model_choice(
            "navigator", providers.navigator, settings, offline="deterministic"),
        "emotion_audio": emotion_audio,
        "emotion_text": fast_model_choice(
            "emotion_text", providers.emotion_text, settings, offline="local"),
        "director": fast_model_choice(
            "director", providers.director, settings, offline="local"),
        "safety_judge": fast_model_choice(
            "safety_judge", providers.safety_judge, settings, offline="local"),
        "embeddings": _choose(
            "embeddings", providers.embeddings, "openai",
            providers.openai_api_key is not None, "OPENAI_API_KEY"),
        "world_model": fast_model_choice(
            "world_model", providers.world_model, settings, offline="local"),
        "audio_verification": _choose(
            "audio_verification", providers.audio_verification, "google",
            providers.google_api_key is not None, "GOOGLE_API_KEY"),
    }


def fast_model_choice(
    component: str, requested: str, settings: Settings, *, offline: str
) -> ProviderChoice:
    """A fast model (Gemini Flash first, then Claude Haiku) for a side job, or the
    offline engine named `offline` when neither key is set."""
    keys = {"google": settings.providers.google_api_key,
            "anthropic": settings.providers.anthropic_api_key}
    names = {"google": "GOOGLE_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
    if requested == "auto":
        for provider in ("google", "anthropic"):
            if keys[provider] is not None:
                return ProviderChoice(component, provider, f"auto: {names[provider]} is set")
        return ProviderChoice(component, offline, "auto: no GOOGLE_API_KEY or ANTHROPIC_API_KEY")
    if requested == offline:
        return ProviderChoice(component, offline, f"{component.upper()}_PROVIDER={offline}")
    return _choose(component, requested, requested, keys[requested] is not None,
                   names[requested])
