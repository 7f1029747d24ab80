"""Provider choice per component and settings parsing."""

import pytest
from pydantic import ValidationError

from config import Settings, flat_names
from pipeline.provider_choice import resolve_providers
from pipeline.providers import (
    CLOUD_VOICES_CALL_CAPACITY,
    LOCAL_VOICES_CALL_CAPACITY,
    ProviderPlan,
)


def make(**values) -> Settings:
    return Settings(_env_file=None, **values)


def test_auto_uses_local_engines_when_no_keys_are_set():
    choices = resolve_providers(make())
    assert {name: c.provider for name, c in choices.items()} == {
        "stt": "local", "tts": "local", "llm": "local", "navigator": "deterministic",
        "emotion_audio": "local", "emotion_text": "local", "director": "local",
        "safety_judge": "local", "embeddings": "local", "world_model": "local",
        "audio_verification": "local",
    }
    assert "DEEPGRAM_API_KEY is not set" in choices["stt"].reason


def test_auto_uses_cloud_providers_when_their_keys_are_set():
    choices = resolve_providers(
        make(deepgram_api_key="dg", elevenlabs_api_key="el", anthropic_api_key="an")
    )
    assert (choices["stt"].provider, choices["tts"].provider, choices["llm"].provider) == (
        "deepgram", "elevenlabs", "anthropic",
    )
    assert "is set" in choices["llm"].reason


def test_the_navigator_is_gemini_flash_with_a_google_key_else_claude_haiku_else_the_rules():
    assert resolve_providers(make(google_api_key="g", anthropic_api_key="a"))[
        "navigator"].provider == "google"
    assert resolve_providers(make(anthropic_api_key="a"))["navigator"].provider == "anthropic"
    assert resolve_providers(make(openai_base_url="http://127.0.0.1:8080/v1"))[
        "navigator"].provider == "deterministic"
    forced = make(anthropic_api_key="a", navigator_provider="deterministic")
    assert resolve_providers(forced)["navigator"].provider == "deterministic"
    with pytest.raises(ValueError, match="GOOGLE_API_KEY"):
        resolve_providers(make(navigator_provider="google"))


def test_emotion_is_heard_by_hume_and_read_by_the_fast_model_when_their_keys_are_set():
    choices = resolve_providers(make(hume_api_key="h", google_api_key="g"))
    assert (choices["emotion_audio"].provider, choices["emotion_text"].provider) == (
        "hume", "google")
    assert resolve_providers(make(anthropic_api_key="a"))["emotion_text"].provider == "anthropic"
    offline = make(hume_api_key="h", google_api_key="g", emotion_audio_provider="local",
                   emotion_text_provider="local")
    assert {resolve_providers(offline)[k].provider for k in ("emotion_audio", "emotion_text")} == {
        "local"}
    with pytest.raises(ValueError, match="HUME_API_KEY"):
        resolve_providers(make(emotion_audio_provider="hume"))


def test_openai_compatible_server_is_chosen_by_base_url_alone():
    choices = resolve_providers(make(openai_base_url="http://127.0.0.1:8080/v1"))
    assert choices["llm"].provider == "openai"


def test_explicit_local_wins_over_a_present_key():
    choices = resolve_providers(make(deepgram_api_key="dg", stt_provider="local"))
    assert choices["stt"].provider == "local"


def test_requesting_a_cloud_provider_without_its_key_is_a_clear_error():
    with pytest.raises(ValueError, match="DEEPGRAM_API_KEY"):
        resolve_providers(make(stt_provider="deepgram"))


def test_unknown_provider_name_is_rejected():
    with pytest.raises(ValidationError):
        make(tts_provider="festival")


def test_system_keyterms_accept_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("SYSTEM_KEYTERMS", "MRI, x-ray ,  physio")
    assert Settings(_env_file=None).call.system_keyterms == ["MRI", "x-ray", "physio"]


def test_secrets_never_appear_in_the_settings_repr():
    settings = make(anthropic_api_key="sk-ant-very-secret")
    assert "very-secret" not in repr(settings)


def test_serving_with_a_provider_forced_but_no_key_exits_with_a_clear_error(
    monkeypatch, capsys, tmp_path
):
    from main import main

    monkeypatch.setenv("STT_PROVIDER", "deepgram")
    monkeypatch.delenv("DEEPGRAM_API_KEY", raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert main(["serve"]) == 2
    assert "STT_PROVIDER=deepgram needs DEEPGRAM_API_KEY" in capsys.readouterr().err


def test_call_capacity_defaults_to_what_the_chosen_voices_were_measured_to_carry():
    cloud = make(deepgram_api_key="dg", elevenlabs_api_key="el")
    local = make()
    half_local = make(deepgram_api_key="dg")
    assert ProviderPlan.from_settings(cloud).call_capacity(cloud) == CLOUD_VOICES_CALL_CAPACITY
    assert ProviderPlan.from_settings(local).call_capacity(local) == LOCAL_VOICES_CALL_CAPACITY
    assert ProviderPlan.from_settings(half_local).call_capacity(half_local) == (
        LOCAL_VOICES_CALL_CAPACITY
    )
    pinned = make(max_concurrent_calls=7)
    assert ProviderPlan.from_settings(pinned).call_capacity(pinned) == 7


def test_the_documented_example_environment_is_valid_settings():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / ".env.example"
    settings = Settings(_env_file=example)
    assert settings.providers.emotion_audio == "auto" and settings.emotion.text_timeout_s == 2.5


OPERATIONS_SETTINGS = (
    "REDIS_URL", "CALL_REGISTRY_TTL_S", "OBSERVER_REPLAY_EVENTS", "OBSERVER_QUEUE_EVENTS",
    "OBSERVER_PING_S", "OBSERVER_AUTH_TIMEOUT_S", "OBSERVER_MAX_PER_WORKSPACE",
    "API_RATE_LIMIT_PER_MINUTE",
    "API_AUTH_FAILURES_PER_MINUTE", "API_MAX_BODY_BYTES", "TRANSCRIPT_VERIFY_TIMEOUT_S",
    "FORWARDED_ALLOW_IPS",
)


def test_the_example_environment_documents_the_operations_settings_at_their_defaults(
        monkeypatch):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / ".env.example"
    text = example.read_text()
    missing = [name for name in OPERATIONS_SETTINGS
               if f"\n{name}=" not in text and f"\n# {name}=" not in text]
    assert missing == []
    for name in OPERATIONS_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    documented, default = Settings(_env_file=example), Settings(_env_file=None)
    for name in OPERATIONS_SETTINGS:
        group, field = flat_names(Settings)[name.lower()]
        assert getattr(getattr(documented, group), field) == getattr(
            getattr(default, group), field), name


def test_observer_and_safety_settings_parse_from_the_environment(monkeypatch):
    monkeypatch.setenv("SILENCE_CHECKINS_S", "5, 10,20")
    monkeypatch.setenv("CRISIS_RESOURCES", '[{"name": "the crisis line", "phone": "988"}]')
    monkeypatch.setenv("HUMAN_TRANSFER_NUMBER", "+15550100999")
    settings = Settings(_env_file=None)
    assert settings.conversation.silence_checkins_s == [5.0, 10.0, 20.0]
    assert settings.safety.crisis_resources[0].phone == "988"
    assert settings.telephony.human_transfer_number == "+15550100999"


def test_turn_taking_bounds_parse_from_the_environment(monkeypatch):
    monkeypatch.setenv("REPLY_WATCHDOG_S", "6")
    monkeypatch.setenv("DEFERRED_TURN_MAX_AGE_S", "5.5")
    settings = Settings(_env_file=None)
    assert (settings.turns.reply_watchdog_s, settings.turns.deferred_turn_max_age_s) == (6.0, 5.5)


@pytest.mark.parametrize("values", [
    {"silence_checkins_s": "0,10"},
    {"director_wind_down_s": 800, "director_force_end_s": 720},
    {"safety_candidate_similarity": 0.9, "safety_escalate_similarity": 0.85},
    {"crisis_resources": [{"name": "made up", "phone": "call us"}]},
    {"human_transfer_number": "911"},
    {"reply_watchdog_s": 0},
    {"reply_watchdog_s": 90},
    {"deferred_turn_max_age_s": -1},
])
def test_inconsistent_observer_settings_are_refused_at_start(values):
    with pytest.raises(ValueError):
        make(**values)


def test_the_safety_embedder_is_openais_only_with_its_key():
    assert resolve_providers(make(openai_api_key="k"))["embeddings"].provider == "openai"
    assert resolve_providers(make())["embeddings"].provider == "local"
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        resolve_providers(make(embedding_provider="openai"))


def test_the_voice_fault_bounds_keep_their_flat_names(monkeypatch):
    monkeypatch.setenv("STT_RECONNECT_TRIES", "2")
    monkeypatch.setenv("TTS_FIRST_BYTE_TIMEOUT_S", "0.8")
    providers = Settings(_env_file=None).providers
    assert (providers.stt_reconnect_tries, providers.tts_first_byte_timeout_s) == (2, 0.8)
    assert Settings(_env_file=None, tts_reconnect_wait_s=0.5).providers.tts_reconnect_wait_s == 0.5
