"""What the control plane stores for voice settings: strict input, the keyterm rules,
partial updates over what is stored, and the adaptation policy table (no server)."""

import pytest
import yaml
from pydantic import ValidationError

from call.voice_settings import (
    MAX_TERM_CHARS,
    VoiceSettings,
    VoiceSettingsInput,
    call_keyterms,
    clean_terms,
    load_voice_settings_policy,
    parse_voice_settings,
    stored_fields,
    voice_settings_policy,
)
from processors.emotion.tone import PROSODY_SCORE


def refused_fields(data: dict) -> set[str]:
    with pytest.raises(ValidationError) as caught:
        VoiceSettingsInput.model_validate(data)
    return {str(error["loc"][0]) for error in caught.value.errors()}


def test_strict_input_names_every_bad_field_and_refuses_loose_types():
    assert refused_fields({
        "speed": 1.5, "volume": "1.0", "tone": "furious", "voice": "x",
        "fillers_enabled": 1, "emotion_enabled": "true", "keyterms": "MRI",
        "sensitive_topics": ["billing", 3], "voice_id": 42,
    }) == {"speed", "volume", "tone", "voice", "fillers_enabled", "emotion_enabled",
           "keyterms", "sensitive_topics", "voice_id"}
    assert refused_fields({"voice_id": "../../etc", "correction_categories": ["a\x00"]}) == {
        "voice_id", "correction_categories"}
    # The lenient parse of the same blob keeps a call running on defaults instead.
    settings, problems = parse_voice_settings({"tone": "furious", "speed": 0.9})
    assert (settings.tone, settings.speed) == ("neutral", 0.9)
    assert problems == ["voice setting 'tone' is invalid; using its default"]


def test_only_the_fields_given_are_stored():
    given = VoiceSettingsInput.model_validate({"speed": 1, "voice_id": None})
    assert given.model_dump(mode="json", exclude_unset=True) == {"speed": 1.0, "voice_id": None}
    assert given.sensitive_topics == VoiceSettings().sensitive_topics  # still the defaults


def test_terms_are_normalised_like_the_keyterm_merge_and_bounded():
    assert clean_terms(["Dr.  Osei", "dr. osei", " MRI "]) == ["Dr. Osei", "MRI"]
    with pytest.raises(ValueError, match="term 1"):
        clean_terms(["ok", "x" * (MAX_TERM_CHARS + 1)])
    with pytest.raises(ValueError, match="term 0"):
        clean_terms(["   "])
    with pytest.raises(ValueError, match="term 1 must not contain control"):
        clean_terms(["MRI", "x\x00y"])
    with pytest.raises(ValueError, match="at most 100"):
        clean_terms([f"t{i}" for i in range(101)])
    assert len(clean_terms([f"t{i}" for i in range(100)])) == 100
    settings = VoiceSettingsInput.model_validate({"keyterms": ["MRI", "physio"]})
    assert call_keyterms(["mri", "Dr. Osei"], settings, ["appointment", "Physio"]) == [
        "mri", "Dr. Osei", "physio", "appointment"]


def test_a_partial_update_builds_on_the_valid_stored_fields_only():
    raw = {"speed": 0.9, "tone": "calm", "volume": 7, "legacy_flag": True}
    assert stored_fields(raw) == {"speed": 0.9, "tone": "calm"}
    assert stored_fields('{"keyterms": ["MRI"]}') == {"keyterms": ["MRI"]}
    assert stored_fields("{not json") == {} and stored_fields(None) == {}


def test_the_policy_table_covers_every_setting():
    policy = {row.field: row for row in voice_settings_policy()}
    assert set(policy) == set(VoiceSettings.model_fields)
    assert policy["tone"].adaptation == "replaced" and str(PROSODY_SCORE) in policy["tone"].note
    assert policy["speed"].adaptation == policy["volume"].adaptation == "never"
    assert policy["keyterms"].adaptation == "merged"
    assert policy["sensitive_topics"].adaptation == "fallback"


def test_a_policy_file_missing_a_setting_is_refused(tmp_path):
    rows = [row.model_dump() for row in voice_settings_policy() if row.field != "volume"]
    short = tmp_path / "policy.yaml"
    short.write_text(yaml.safe_dump({"version": 1, "fields": rows}))
    with pytest.raises(ValueError, match=r"missing \['volume'\]"):
        load_voice_settings_policy(short)
    doubled = tmp_path / "doubled.yaml"
    doubled.write_text(yaml.safe_dump({"version": 1, "fields": rows + rows[:1] + [
        {**rows[0], "field": "volume"}]}))
    with pytest.raises(ValueError, match="rows 12"):
        load_voice_settings_policy(doubled)
