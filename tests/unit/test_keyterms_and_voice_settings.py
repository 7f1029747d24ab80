"""Keyterm layers and workspace voice settings with safe defaults."""

from call.voice_settings import DEFAULT_SENSITIVE_TOPICS, VoiceSettings, parse_voice_settings
from services.keyterms import merge_keyterms


def test_keyterms_merge_in_layer_order_without_duplicates():
    merged = merge_keyterms(["MRI", "Dr. Osei"], ["mri", "physio  therapy"], ["appointment", "MRI"])
    assert merged == ["MRI", "Dr. Osei", "physio therapy", "appointment"]


def test_keyterms_skip_blank_and_non_text_entries_and_respect_the_limit():
    merged = merge_keyterms(["", "  ", None, 7, "a"], [f"t{i}" for i in range(10)], limit=5)
    assert merged == ["a", "t0", "t1", "t2", "t3"]


def test_missing_voice_settings_give_the_defaults():
    settings, problems = parse_voice_settings(None)
    assert settings == VoiceSettings() and problems == []
    assert settings.fillers_enabled and settings.emotion_enabled
    assert settings.sensitive_topics == DEFAULT_SENSITIVE_TOPICS


def test_one_bad_field_falls_back_alone_and_is_reported():
    settings, problems = parse_voice_settings({"speed": 9, "tone": "calm", "keyterms": ["MRI"]})
    assert settings.speed == 1.0
    assert settings.tone == "calm" and settings.keyterms == ("MRI",)
    assert problems == ["voice setting 'speed' is invalid; using its default"]


def test_unparseable_settings_give_the_defaults_with_a_problem():
    for raw in ("{not json", [1, 2], 42):
        settings, problems = parse_voice_settings(raw)
        assert settings == VoiceSettings()
        assert problems


def test_settings_stored_as_json_text_are_parsed():
    settings, problems = parse_voice_settings('{"volume": 1.5, "post_call_analysis_enabled": true}')
    assert settings.volume == 1.5 and settings.post_call_analysis_enabled and not problems
