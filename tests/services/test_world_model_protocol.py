"""The world model's model calls against local fakes of the providers' APIs: Gemini
hears a turn's audio (inline WAV, schema, validated pairs), the extractor and the
verification judges ask the fast model and fall back to rules on junk or silence."""

from __future__ import annotations

import base64
import io
import json
import wave
from datetime import date

import numpy as np
import pytest

from config import Settings
from db.world import Carrier
from language.carriers import default_carriers
from pipeline.providers import (
    ProviderPlan,
    build_audio_verifier,
    build_extractor,
    build_verifier,
)
from processors.world.verification import ModelJudges, RulesJudges
from tests.model_fakes import serve_anthropic, serve_gemini

pytestmark = pytest.mark.timeout(20)
CARRIERS = [Carrier(str(i), c.name, tuple(c.aliases), None)
            for i, c in enumerate(default_carriers())]
PCM = (np.sin(np.arange(8000) / 8) * 3000).astype(np.int16).tobytes()  # 1 s at 8 kHz


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


async def test_gemini_hears_the_turn_s_audio_and_its_pairs_are_validated():
    answer = {"corrections": [
        {"field": "date_of_birth", "heard": "march fourteen", "corrected": "1948-03-14",
         "confidence": 8},
        {"field": "date_of_birth", "heard": "x", "corrected": "not a date", "confidence": 9}],
        "both_wrong": False}
    async with serve_gemini([json.dumps(answer)]) as (fake, base_url):
        values = {"google_api_key": "g-test", "google_base_url": base_url}
        verifier = build_audio_verifier(ProviderPlan.from_settings(settings(**values)),
                                        settings(**values))
        check = await verifier.check(PCM, 8000, "march fourteen nineteen forty", "date",
                                     ["medication names"])

    assert verifier.name == "google"
    assert [(c.corrected, c.confidence) for c in check.corrections] == [("1948-03-14", 8)]
    assert check.band == "use"
    body = fake.requests[0]["body"]
    parts = body["contents"][-1]["parts"]
    audio = next(p["inlineData"] for p in parts if "inlineData" in p)
    assert audio["mime_type"] == "audio/wav"  # as google-genai sends it
    with wave.open(io.BytesIO(base64.urlsafe_b64decode(audio["data"]))) as sent:
        assert (sent.getframerate(), sent.getnframes()) == (8000, 8000)
    prompt = next(p["text"] for p in parts if "text" in p)
    assert "medication names" in prompt and "march fourteen nineteen forty" in prompt
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"


async def test_gemini_junk_or_silence_is_an_error_the_navigator_survives():
    async with serve_gemini(["no json here", ("slow", 2.0, "{}")]) as (_fake, base_url):
        values = {"google_api_key": "g", "google_base_url": base_url,
                  "audio_verification_timeout_s": 0.5}
        verifier = build_audio_verifier(ProviderPlan.from_settings(settings(**values)),
                                        settings(**values))
        with pytest.raises(ValueError):
            await verifier.check(PCM, 8000, "five five five", "phone", [])
        with pytest.raises(TimeoutError):
            await verifier.check(PCM, 8000, "five five five", "phone", [])


async def test_the_model_extractor_normalises_and_falls_back_to_rules():
    said = "my insurance is now with signa, member id u 4 8 2 9 1 7 3"
    model = {"insurance_carrier": "Cigna", "member_id": "u-4829173", "phone": "555"}
    async with serve_anthropic([json.dumps(model), "garbage"]) as (fake, base_url):
        values = {"anthropic_api_key": "a-test", "anthropic_base_url": base_url}
        extractor = build_extractor(ProviderPlan.from_settings(settings(**values)),
                                    settings(**values))
        by_model = await extractor.extract(said, CARRIERS)
        by_rules = await extractor.extract(said, CARRIERS)  # junk answer: the rules

    assert extractor.name == "model"
    [insurance] = by_model
    assert insurance.as_dict["carrier_name"] == "Cigna"
    assert insurance.as_dict["member_id"] == "U4829173"  # "555" was no phone number
    assert [f.as_dict.get("member_id") for f in by_rules] == ["U4829173"]
    assert f'"{said}"' in fake.requests[0]["body"]["messages"][0]["content"]


def test_no_key_means_rules_everywhere():
    plan = ProviderPlan.from_settings(settings())
    assert build_extractor(plan, settings()).name == "rules"
    assert isinstance(build_verifier(plan, settings()), RulesJudges)


def test_a_fast_model_key_gives_model_judges():
    values = {"google_api_key": "g"}
    judges = build_verifier(ProviderPlan.from_settings(settings(**values)), settings(**values))
    assert isinstance(judges, ModelJudges)


def test_the_bands_follow_the_confidence_table():
    from processors.world.audio_check import AudioCheck, Correction

    def band(confidence: int) -> str:
        return AudioCheck("date", (Correction("d", "", "1948-03-14", confidence),), False,
                          "x").band

    assert [band(c) for c in (9, 8, 7, 5, 4, 1)] == ["use", "use", "confirm", "confirm",
                                                     "repeat", "repeat"]
    assert AudioCheck("date", (), True, "x").band == "spell"
    assert date.fromisoformat("1948-03-14")
