"""Which engine or vendor does each job, and each vendor's key, model and address.

pipeline/provider_choice.py decides from these which provider each component uses.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from config.group import SettingsGroup

STTProvider = Literal["auto", "deepgram", "local"]
TTSProvider = Literal["auto", "elevenlabs", "local"]
LLMProvider = Literal["auto", "anthropic", "openai", "local"]
NavigatorProvider = Literal["auto", "google", "anthropic", "deterministic"]
EmotionAudioProvider = Literal["auto", "hume", "local"]
EmotionTextProvider = Literal["auto", "google", "anthropic", "local"]
DirectorProvider = Literal["auto", "google", "anthropic", "local"]
SafetyJudgeProvider = Literal["auto", "google", "anthropic", "local"]
EmbeddingProvider = Literal["auto", "openai", "local"]
WorldModelProvider = Literal["auto", "google", "anthropic", "local"]
AudioVerificationProvider = Literal["auto", "google", "local"]
PMSProvider = Literal["builtin", "cliniko"]


class ProviderSettings(SettingsGroup):
    """Which engine or vendor does each job, and each vendor's key, model and address.

    `auto` picks the cloud provider when its key is set, else the local engine. The side
    jobs (navigator, emotion_text, director, safety_judge, world_model) run on the fast
    model: Gemini Flash with GOOGLE_API_KEY, else Claude Haiku with ANTHROPIC_API_KEY,
    else their offline engine.
    """

    stt: STTProvider = Field(default="auto", validation_alias="stt_provider")
    tts: TTSProvider = Field(default="auto", validation_alias="tts_provider")
    llm: LLMProvider = Field(default="auto", validation_alias="llm_provider")
    navigator: NavigatorProvider = Field(
        default="auto", validation_alias="navigator_provider",
        description="Who picks the context graph's next action: the fast model or the "
        "deterministic router rules (no key needed).",
    )
    emotion_audio: EmotionAudioProvider = Field(
        default="auto", validation_alias="emotion_audio_provider",
        description="How the caller sounds: Hume's realtime Expression Measurement (with "
        "HUME_API_KEY) or the offline signal analyzer (pitch, loudness, rate).",
    )
    emotion_text: EmotionTextProvider = Field(
        default="auto", validation_alias="emotion_text_provider",
        description="What the caller's words carry: the fast model or VADER plus phrase rules.",
    )
    director: DirectorProvider = Field(
        default="auto", validation_alias="director_provider",
        description="Who advises the agent from the side each turn: the fast model or rules.",
    )
    safety_judge: SafetyJudgeProvider = Field(
        default="auto", validation_alias="safety_judge_provider",
        description="Who confirms a safety candidate: the fast model or the concepts' rules.",
    )
    embeddings: EmbeddingProvider = Field(
        default="auto", validation_alias="embedding_provider",
        description="Sentence embeddings for the safety monitor and the world model's search: "
        "OpenAI text-embedding-3-small with OPENAI_API_KEY, else WordLlama from its wheel "
        "(offline).",
    )
    world_model: WorldModelProvider = Field(
        default="auto", validation_alias="world_model_provider",
        description="Who extracts facts from each caller turn and judges the call's writes "
        "afterwards: the fast model or rules.",
    )
    audio_verification: AudioVerificationProvider = Field(
        default="auto", validation_alias="audio_verification_provider",
        description="Who re-hears a caller's names, dates, phone numbers and member ids: Gemini "
        "(audio in, with GOOGLE_API_KEY) or a second PocketSphinx pass held to the field's "
        "grammar.",
    )
    # Where open times are read and verified writes go: the world model itself
    # (`builtin`) or Cliniko's public REST API (`cliniko`, which needs its key).
    pms: PMSProvider = Field(default="builtin", validation_alias="pms_provider")

    deepgram_api_key: SecretStr | None = None
    deepgram_model: str = "nova-3-general"
    deepgram_base_url: str | None = Field(
        default=None, description="Override Deepgram's API host (tests use a local fake)."
    )

    elevenlabs_api_key: SecretStr | None = None
    elevenlabs_voice_id: str = "21m00Tcm4TlvDq8ikWAM"
    elevenlabs_model: str = "eleven_flash_v2_5"
    elevenlabs_url: str = Field(
        default="wss://api.elevenlabs.io",
        description="ElevenLabs streaming endpoint (tests use a local fake).",
    )

    anthropic_api_key: SecretStr | None = None
    anthropic_model: str = "claude-sonnet-4-6"
    anthropic_base_url: str | None = Field(
        default=None, description="Override Anthropic's API base URL (a gateway, or a test fake)."
    )

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = Field(
        default=None, description="Any OpenAI-compatible server (llama.cpp, Ollama, vLLM)."
    )
    openai_model: str = "gpt-4.1-mini"

    google_api_key: SecretStr | None = None
    google_base_url: str | None = Field(
        default=None, description="Override the Gemini API base URL (a gateway, or a test fake)."
    )
    google_navigator_model: str = "gemini-2.5-flash"
    anthropic_navigator_model: str = "claude-haiku-4-5"

    hume_api_key: SecretStr | None = None
    hume_base_url: str | None = Field(
        default=None, description="Override Hume's API host (tests use a local fake)."
    )

    local_tts_voice: str = "en-us"
    local_tts_words_per_minute: int = Field(default=165, ge=80, le=450)

    # When a cloud voice provider's stream fails mid-call (processors/voice/).
    stt_reconnect_tries: int = Field(
        default=3, ge=1, le=10,
        description="A dropped Deepgram stream is reopened at most this many times in a row "
        "(waits doubling from PROVIDER_RECONNECT_FIRST_WAIT_S); then the offline recognizer "
        "takes over and the caller is told.",
    )
    provider_reconnect_first_wait_s: float = Field(
        default=0.25, gt=0, le=5,
        description="Wait before the first try to reopen a dropped voice stream.",
    )
    stt_final_timeout_s: float = Field(
        default=1.5, gt=0, le=10,
        description="A caller turn whose final transcript has not come this long after it "
        "ended counts as a stalled stream: reopened, and the turn's audio sent again.",
    )
    tts_first_byte_timeout_s: float = Field(
        default=1.5, gt=0, le=10,
        description="A sentence ElevenLabs has not started to voice this long after it was "
        "sent is said by the local voice instead.",
    )
    tts_reconnect_wait_s: float = Field(
        default=1.0, gt=0, le=2.5,
        description="How long a sentence cut off by a dropped ElevenLabs stream waits for "
        "the stream to come back and finish it before the local voice does.",
    )

    cliniko_api_key: SecretStr | None = Field(
        default=None,
        description="A Cliniko user's API key; its suffix (-au1, -uk1, ...) names the shard "
        "whose API serves the account (no suffix: au1).",
    )
    cliniko_base_url: str | None = Field(
        default=None,
        description="Override Cliniko's API base URL (default https://api.<shard>.cliniko.com/v1 "
        "from the key; tests use a local fake).",
    )
    cliniko_user_agent: str = Field(
        default="clinic-voice-agent (ops@example.invalid)",
        pattern=r"^\S.* \([^()\s]+@[^()\s]+\)$",
        description="Sent on every Cliniko request as `APP_NAME (CONTACT_EMAIL)`: Cliniko "
        "may block requests without a name and a contact email.",
    )

    cliniko_booking_wait_s: float = Field(
        default=1.2, gt=0, le=1.4,
        description="How long a booking waits for Cliniko at each step (re-checking the slot, "
        "writing it) before the slot is held here and the write is left to the job queue, "
        "which retries it with backoff (two steps stay inside a tool's 3 s).",
    )

    @model_validator(mode="after")
    def _pms_has_credentials(self) -> ProviderSettings:
        if self.pms == "cliniko" and self.cliniko_api_key is None:
            raise ValueError("PMS_PROVIDER=cliniko needs CLINIKO_API_KEY")
        return self
