"""One settings object for the whole service, read from the environment and `.env`.

Every component reads its configuration from here; nothing else parses env vars.
Provider choice per component defaults to ``auto``: the cloud provider when its
key is set, else the local engine, so the service runs with no keys at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

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


class CrisisResource(BaseModel):
    """A crisis line the operator has verified for their callers (never made up)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=2, max_length=80)
    phone: str = Field(pattern=r"^\+?[0-9]{3,15}$")

# Engineering-level fallback vocabulary: the third keyterm layer, after the service's
# and the workspace's.
DEFAULT_SYSTEM_KEYTERMS = (
    "appointment",
    "reschedule",
    "cancel",
    "doctor",
    "clinic",
    "insurance",
    "prescription",
    "date of birth",
)


class Settings(BaseSettings):
    """Service configuration. Field names map to upper-case environment variables."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", validate_default=True
    )

    # --- Service ---------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=7860, ge=1, le=65535)
    public_url: str | None = Field(
        default=None,
        description="Public base URL Twilio reaches (https://…); used for signature "
        "validation and the media stream URL. Unset: derived from the request.",
    )
    data_dir: Path = Path(".data")
    log_level: str = "INFO"

    # --- Database --------------------------------------------------------------
    database_url: SecretStr | None = Field(
        default=None, description="PostgreSQL with pgvector. Unset: embedded PostgreSQL 16."
    )
    db_write_retries: int = Field(default=5, ge=0)
    db_write_timeout_s: float = Field(default=5.0, gt=0)

    # --- Operations: API, observers, several pods --------------------------------
    redis_url: SecretStr | None = Field(
        default=None,
        description="Redis (or Valkey) shared by several pods: observer events, the active "
        "call registry, operator actions. Unset: in-process (one pod).",
    )
    call_registry_ttl_s: float = Field(
        default=30.0, ge=3, le=600,
        description="An active call drops out of the registry this long after its pod's last "
        "heartbeat (pods beat every third of it).",
    )
    observer_replay_events: int = Field(
        default=200, ge=0, le=5000,
        description="Recent events of a call replayed to an observer that joins late.",
    )
    observer_queue_events: int = Field(
        default=500, ge=10, le=100_000,
        description="Events waiting for one observer; past it the observer is sent a notice "
        "of what it missed (it never slows the call).",
    )
    observer_ping_s: float = Field(default=30.0, gt=0, le=300)
    observer_auth_timeout_s: float = Field(
        default=5.0, gt=0, le=60,
        description="How long an observer socket may take to present its API key.",
    )
    observer_max_per_workspace: int = Field(
        default=50, ge=1, le=10_000,
        description="Observer sockets one workspace may hold open on one pod; past it a new "
        "one is closed with 1013 (try again later) once authenticated.",
    )
    api_rate_limit_per_minute: int = Field(
        default=600, ge=1,
        description="Requests one API key may make per minute (per pod; a burst of a tenth "
        "of it at once).",
    )
    api_auth_failures_per_minute: int = Field(
        default=20, ge=1, le=10_000,
        description="Failed API-key authentications one client address may make per minute "
        "(HTTP and observer sockets, per pod); past it, only keys that address has already "
        "proven are checked, others get 429 / close 1008.",
    )
    api_max_body_bytes: int = Field(default=1 << 20, ge=1024)
    forwarded_allow_ips: str | None = Field(
        default=None,
        description="Reverse proxies (comma-separated addresses or CIDR ranges, or *) whose "
        "X-Forwarded-For/-Proto are trusted, so the failed-auth throttle and the logs see the "
        "real client address. Unset: uvicorn's default, the local host only.",
    )
    transcript_verify_timeout_s: float = Field(
        default=300.0, gt=0, le=3600,
        description="Longest a recording's re-transcription (verify-transcript) may take.",
    )

    # --- Practice-management system (services/practice) -----------------------
    # Where open times are read and verified writes go: the world model itself
    # (`builtin`) or Cliniko's public REST API (`cliniko`, which needs its key).
    pms_provider: Literal["builtin", "cliniko"] = "builtin"
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

    @model_validator(mode="after")
    def _pms_has_credentials(self) -> Settings:
        if self.pms_provider == "cliniko" and self.cliniko_api_key is None:
            raise ValueError("PMS_PROVIDER=cliniko needs CLINIKO_API_KEY")
        return self

    # --- Providers -------------------------------------------------------------
    stt_provider: STTProvider = "auto"
    tts_provider: TTSProvider = "auto"
    llm_provider: LLMProvider = "auto"
    navigator_provider: NavigatorProvider = Field(
        default="auto",
        description="Who picks the context graph's next action: a fast model (Gemini Flash "
        "with GOOGLE_API_KEY, else Claude Haiku with ANTHROPIC_API_KEY) or the deterministic "
        "router rules (no key needed).",
    )

    emotion_audio_provider: EmotionAudioProvider = Field(
        default="auto",
        description="How the caller sounds: Hume's realtime Expression Measurement (with "
        "HUME_API_KEY) or the offline signal analyzer (pitch, loudness, rate).",
    )
    emotion_text_provider: EmotionTextProvider = Field(
        default="auto",
        description="What the caller's words carry: the fast model (Gemini Flash with "
        "GOOGLE_API_KEY, else Claude Haiku with ANTHROPIC_API_KEY) or VADER plus phrase rules.",
    )

    director_provider: DirectorProvider = Field(
        default="auto",
        description="Who advises the agent from the side each turn: the fast model (Gemini "
        "Flash with GOOGLE_API_KEY, else Claude Haiku with ANTHROPIC_API_KEY) or rules.",
    )

    safety_judge_provider: SafetyJudgeProvider = Field(
        default="auto",
        description="Who confirms a safety candidate: the fast model (Gemini Flash with "
        "GOOGLE_API_KEY, else Claude Haiku with ANTHROPIC_API_KEY) or the concepts' rules.",
    )
    embedding_provider: EmbeddingProvider = Field(
        default="auto",
        description="Sentence embeddings for the safety monitor and the world model's search: "
        "OpenAI text-embedding-3-small with OPENAI_API_KEY, else WordLlama from its wheel "
        "(offline).",
    )
    world_model_provider: WorldModelProvider = Field(
        default="auto",
        description="Who extracts facts from each caller turn and judges the call's writes "
        "afterwards: the fast model (Gemini Flash with GOOGLE_API_KEY, else Claude Haiku with "
        "ANTHROPIC_API_KEY) or rules.",
    )
    audio_verification_provider: AudioVerificationProvider = Field(
        default="auto",
        description="Who re-hears a caller's names, dates, phone numbers and member ids: Gemini "
        "(audio in, with GOOGLE_API_KEY) or a second PocketSphinx pass held to the field's "
        "grammar.",
    )
    extraction_timeout_s: float = Field(default=3.0, gt=0, le=30)
    verification_timeout_s: float = Field(
        default=20.0, gt=0, le=300,
        description="Each model stage of the after-call verification (then the rules judge).")
    audio_verification_timeout_s: float = Field(
        default=2.5, gt=0, le=10,
        description="How long a caller waits for an audio check before the call goes on "
        "with the transcript as heard.")
    phone_country_code: str = Field(
        default="1", pattern=r"^[1-9][0-9]{0,2}$",
        description="Country code for phone numbers callers say without one (1: North "
        "American numbering).")

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
    emotion_text_timeout_s: float = Field(
        default=2.5, gt=0, le=10,
        description="Longest wait for the fast model to score one caller transcript.",
    )

    director_timeout_s: float = Field(
        default=3.0, gt=0, le=10,
        description="Longest wait for the director's analysis of one turn (off the voice "
        "path: a late analysis only means no guidance).",
    )

    safety_escalate_similarity: float = Field(
        default=0.85, gt=0, le=1,
        description="A caller turn this similar to a safety concept escalates at once, "
        "without waiting for the judge (so safety holds when the judge is down).",
    )
    safety_candidate_similarity: float = Field(
        default=0.45, gt=0, le=1,
        description="From this similarity a turn goes to the judge, which confirms or not.",
    )
    safety_judge_timeout_s: float = Field(default=3.0, gt=0, le=10)

    local_tts_voice: str = "en-us"
    local_tts_words_per_minute: int = Field(default=165, ge=80, le=450)

    # --- Telephony -------------------------------------------------------------
    twilio_account_sid: str | None = None
    twilio_auth_token: SecretStr | None = None
    twilio_api_base_url: str | None = Field(
        default=None, description="Override Twilio's REST base URL (tests use a local fake)."
    )
    twilio_validate_signature: bool = Field(
        default=True, description="Disabling accepts unsigned webhooks; logs a warning."
    )
    daily_api_key: SecretStr | None = None

    # --- Call behaviour --------------------------------------------------------
    system_keyterms: Annotated[list[str], NoDecode] = Field(default_factory=lambda: list(DEFAULT_SYSTEM_KEYTERMS))
    max_call_duration_s: float = Field(default=1800.0, gt=0)
    emergency_number: str = Field(
        default="911", pattern=r"^[0-9]{2,4}$",
        description="The local emergency number the agent tells a caller in danger to call "
        "(set it for your country, e.g. 000, 112, 999). The agent never says any other.",
    )
    crisis_resources: list[CrisisResource] = Field(
        default_factory=list,
        description="Crisis lines you have verified for your callers, as JSON: "
        '[{"name": "...", "phone": "..."}]. Unset: the agent says it cannot verify one '
        "and a person from the team takes over.",
    )
    human_transfer_number: str | None = Field(
        default=None, pattern=r"^\+[1-9][0-9]{6,14}$",
        description="Where a call the safety monitor hands to a human is put through "
        "(E.164). Unset: the call is held for an operator.",
    )
    context_graph: str = Field(
        default="clinic_booking",
        description="Bundled graph (flows/graphs/<name>.yaml) a service runs when none is stored.",
    )
    max_concurrent_calls: int | None = Field(
        default=None, ge=1,
        description="Calls this process carries at once; one more is told the lines are busy. "
        "Past its capacity a process falls behind real time and callers would hear silence. "
        "Unset: what a 2-vCPU machine was measured to carry with the chosen voices "
        "(pipeline/providers.ProviderPlan.call_capacity, docs/PERFORMANCE.md).",
    )
    director_wind_down_s: float = Field(
        default=540.0, gt=0,
        description="Call time after which the director asks the agent to wind down (9 min).",
    )
    director_force_end_s: float = Field(
        default=720.0, gt=0,
        description="The call's time limit (12 min): the director then does what the "
        "context graph's `time_limit` says (escalate to a person, offer a call back, or end "
        "with a short closing line), unless a goodbye is under way or a human has the call.",
    )
    director_closing_end_s: float = Field(
        default=480.0, gt=0,
        description="When the director sees the call closing after this long (8 min), the "
        "call ends 5 s later.",
    )
    goodbye_delay_s: float = Field(
        default=3.5, gt=0, le=30,
        description="After a caller's strong goodbye, the call ends this much later unless "
        "they keep talking (the agent's own goodbye plays meanwhile).",
    )
    silence_checkins_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [10.0, 20.0, 40.0],
        description="Seconds of caller silence before each check-in ('Are you still "
        "there?'), comma-separated.",
    )
    silence_goodbye_after_s: float = Field(
        default=10.0, gt=0,
        description="Silence after the last check-in before the agent says goodbye and hangs up.",
    )
    deferred_turn_max_age_s: float = Field(
        default=8.0, gt=0, le=60,
        description="A short answer the caller says while the agent is still talking "
        "(\"yes\", \"Tuesday\") is answered once the agent has finished, unless it is "
        "older than this by then.",
    )
    reply_watchdog_s: float = Field(
        default=4.0, gt=0, le=30,
        description="A caller turn whose answer is not heard this long after it was handed "
        "to the agent gets one retry; as long again without it, a short fallback line "
        "(never silence). Paused while a tool runs.",
    )
    turn_max_silence_s: float = Field(
        default=1.5, gt=0, le=5,
        description="Longest silence before a turn the end-of-turn model thinks unfinished "
        "is ended anyway (Pipecat's default is 3 s: too much dead air for short answers).",
    )
    idle_timeout_s: float = Field(
        default=300.0, gt=0, description="End a call after this long with no speech at all."
    )
    start_message_timeout_s: float = Field(default=10.0, gt=0)
    ws_max_message_bytes: int = Field(default=64 * 1024, ge=1024)
    ws_max_bad_messages: int = Field(default=50, ge=1)
    allow_open_eval_sessions: bool = Field(
        default=False,
        description="Let `pipecat eval` open text sessions on /ws without a call created "
        "by a signed /voice/answer. Development only.",
    )

    @field_validator("system_keyterms", mode="before")
    @classmethod
    def _split_keyterms(cls, value: object) -> object:
        """Accept a comma-separated string as well as a JSON list."""
        if isinstance(value, str):
            if value.strip().startswith("["):
                return json.loads(value)
            return [term.strip() for term in value.split(",") if term.strip()]
        return value

    @field_validator("silence_checkins_s", mode="before")
    @classmethod
    def _split_checkins(cls, value: object) -> object:
        if isinstance(value, str):
            if value.strip().startswith("["):
                return json.loads(value)
            return [float(part) for part in value.split(",") if part.strip()]
        return value

    @field_validator("silence_checkins_s")
    @classmethod
    def _checkins_positive(cls, value: list[float]) -> list[float]:
        if not value or any(v <= 0 for v in value):
            raise ValueError("SILENCE_CHECKINS_S needs at least one positive number of seconds")
        return value

    @model_validator(mode="after")
    def _thresholds_in_order(self) -> Settings:
        if self.director_wind_down_s >= self.director_force_end_s:
            raise ValueError("DIRECTOR_WIND_DOWN_S must be less than DIRECTOR_FORCE_END_S")
        if self.safety_candidate_similarity > self.safety_escalate_similarity:
            raise ValueError("SAFETY_CANDIDATE_SIMILARITY must not exceed "
                             "SAFETY_ESCALATE_SIMILARITY")
        return self

    @property
    def recordings_dir(self) -> Path:
        return self.data_dir / "recordings"

    @property
    def embedded_db_dir(self) -> Path:
        return self.data_dir / "pg"


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
    """Decide the STT, TTS and LLM providers from the settings."""
    stt = _choose(
        "stt", settings.stt_provider, "deepgram", settings.deepgram_api_key is not None,
        "DEEPGRAM_API_KEY",
    )
    tts = _choose(
        "tts", settings.tts_provider, "elevenlabs", settings.elevenlabs_api_key is not None,
        "ELEVENLABS_API_KEY",
    )
    if settings.llm_provider == "auto":
        if settings.anthropic_api_key is not None:
            llm = ProviderChoice("llm", "anthropic", "auto: ANTHROPIC_API_KEY is set")
        elif settings.openai_api_key is not None or settings.openai_base_url:
            llm = ProviderChoice("llm", "openai", "auto: OPENAI_API_KEY/OPENAI_BASE_URL is set")
        else:
            llm = ProviderChoice(
                "llm", "local", "auto: no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL"
            )
    elif settings.llm_provider == "anthropic":
        llm = _choose("llm", "anthropic", "anthropic", settings.anthropic_api_key is not None,
                      "ANTHROPIC_API_KEY")
    elif settings.llm_provider == "openai":
        ready = settings.openai_api_key is not None or bool(settings.openai_base_url)
        llm = _choose("llm", "openai", "openai", ready, "OPENAI_API_KEY or OPENAI_BASE_URL")
    else:
        llm = ProviderChoice("llm", "local", "LLM_PROVIDER=local")
    emotion_audio = _choose(
        "emotion_audio", settings.emotion_audio_provider, "hume",
        settings.hume_api_key is not None, "HUME_API_KEY",
    )
    return {
        "stt": stt, "tts": tts, "llm": llm,
        "navigator": _fast_model_choice(
            "navigator", settings.navigator_provider, settings, offline="deterministic"),
        "emotion_audio": emotion_audio,
        "emotion_text": _fast_model_choice(
            "emotion_text", settings.emotion_text_provider, settings, offline="local"),
        "director": _fast_model_choice(
            "director", settings.director_provider, settings, offline="local"),
        "safety_judge": _fast_model_choice(
            "safety_judge", settings.safety_judge_provider, settings, offline="local"),
        "embeddings": _choose(
            "embeddings", settings.embedding_provider, "openai",
            settings.openai_api_key is not None, "OPENAI_API_KEY"),
        "world_model": _fast_model_choice(
            "world_model", settings.world_model_provider, settings, offline="local"),
        "audio_verification": _choose(
            "audio_verification", settings.audio_verification_provider, "google",
            settings.google_api_key is not None, "GOOGLE_API_KEY"),
    }


def _fast_model_choice(
    component: str, requested: str, settings: Settings, *, offline: str
) -> ProviderChoice:
    """A fast model (Gemini Flash first, then Claude Haiku) for a side job, or the
    offline engine named `offline` when neither key is set."""
    keys = {"google": settings.google_api_key, "anthropic": settings.anthropic_api_key}
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


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (tests build their own `Settings` instead)."""
    return Settings()
