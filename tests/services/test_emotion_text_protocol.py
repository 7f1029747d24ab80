"""The fast model scores each caller transcript (53 labels, 9-level sentiment, 6 toxicity
categories) through Pipecat's services, against local fakes of Gemini and Anthropic's
APIs: the schema goes with the request, the answer is checked, junk and slowness fail
in a way the circuit breaker counts, and the key is set per provider."""

from __future__ import annotations

import json

import pytest

from config import Settings
from pipeline.providers import ProviderPlan, build_emotion_providers
from processors.emotion.state import EmotionalState
from services.emotion.reading import TOXICITY_CATEGORIES, Source
from services.llm.emotion import parse_language_scores, reading_from
from tests.model_fakes import serve_anthropic, serve_gemini

pytestmark = pytest.mark.timeout(20)

WORDS = "This is ridiculous, I've been waiting for weeks!"
NO_TOXICITY = dict.fromkeys(TOXICITY_CATEGORIES, 0.0)


def scores(emotions: dict[str, float], level: int = 2, **toxicity: float) -> str:
    sentiment = [0.0] * 9
    sentiment[level - 1] = 1.0
    return json.dumps({
        "emotions": [{"name": name, "score": score} for name, score in emotions.items()],
        "sentiment": sentiment, "toxicity": {**NO_TOXICITY, **toxicity},
    })


def text_provider(**values):
    settings = Settings(_env_file=None, **values)
    return build_emotion_providers(ProviderPlan.from_settings(settings), settings).text


async def test_gemini_flash_scores_the_words_against_the_53_labels():
    answer = scores({"Annoyance": 0.8, "Anger": 0.5, "Sarcasm": 0.05}, level=2, insult=0.1)
    async with serve_gemini([answer]) as (fake, base_url):
        provider = text_provider(google_api_key="g-test", google_base_url=base_url)
        [reading] = await provider.analyze(WORDS, at=12.0)

    assert provider.name == "llm" and reading.source is Source.LANGUAGE
    assert reading.scores == {"Annoyance": 0.8, "Anger": 0.5}  # too weak to say anything: gone
    assert reading.sentiment_level == pytest.approx(2.0) and reading.toxicity["insult"] == 0.1
    request = fake.requests[0]
    assert request["headers"]["x-goog-api-key"] == "g-test"
    config = request["body"]["generationConfig"]
    schema = config["responseJsonSchema"]
    assert config["responseMimeType"] == "application/json"
    assert len(schema["properties"]["emotions"]["items"]["properties"]["name"]["enum"]) == 53
    assert schema["properties"]["toxicity"]["required"] == list(TOXICITY_CATEGORIES)
    prompt = request["body"]["contents"][-1]["parts"][0]["text"]
    assert WORDS.replace('"', "'") in prompt and "Gratitude" in prompt
    assert "rate emotion" in json.dumps(request["body"]["systemInstruction"])


async def test_claude_haiku_scores_the_words_when_only_an_anthropic_key_is_set():
    async with serve_anthropic([scores({"Anxiety": 0.9}, level=3)]) as (fake, base_url):
        provider = text_provider(anthropic_api_key="sk-ant-test", anthropic_base_url=base_url)
        [reading] = await provider.analyze("I'm really worried about my results", at=1.0)

    assert reading.scores == {"Anxiety": 0.9}
    body = fake.requests[0]["body"]
    assert body["model"] == "claude-haiku-4-5"
    assert body["output_config"]["format"]["schema"]["required"] == [
        "emotions", "sentiment", "toxicity"]


async def test_the_readings_reach_the_emotional_state_with_their_sentiment_and_toxicity():
    answer = scores({"Anger": 0.9}, level=1, insult=0.7, obscene=0.6)
    async with serve_gemini([answer]) as (_, base_url):
        readings = await text_provider(google_api_key="g", google_base_url=base_url).analyze(
            "You people are useless", at=1.0)
    state = EmotionalState(clock=lambda: 2.0)
    for reading in readings:
        state.add(reading)
    snapshot = state.snapshot()
    assert snapshot.words_dominant == "Anger" and snapshot.words_sentiment == pytest.approx(1.0)
    assert snapshot.toxicity["insult"] == 0.7 and state.toxicity_peaks["obscene"] == 0.6


@pytest.mark.parametrize("junk", [
    "Sure! The caller sounds annoyed.",  # not JSON
    json.dumps({"emotions": [], "sentiment": [1.0], "toxicity": NO_TOXICITY}),  # 1 level
    json.dumps({"emotions": [{"name": "Anger", "score": 7}], "sentiment": [0.1] * 9,
                "toxicity": NO_TOXICITY}),  # a score out of range
    json.dumps({"emotions": [], "sentiment": [0.1] * 9, "toxicity": {"toxic": 0.1}}),
])
async def test_an_answer_that_does_not_fit_raises_for_the_breaker_to_count(junk):
    async with serve_gemini([junk]) as (_, base_url):
        provider = text_provider(google_api_key="g", google_base_url=base_url)
        with pytest.raises(ValueError, match="not language emotion scores"):
            await provider.analyze(WORDS, at=1.0)


async def test_a_slow_model_times_out_and_a_refused_key_raises():
    async with serve_gemini([("slow", 2.0, scores({"Anger": 0.9})), 401]) as (_, base_url):
        provider = text_provider(google_api_key="g-secret-key", google_base_url=base_url,
                                 emotion_text_timeout_s=0.3)
        with pytest.raises(TimeoutError):
            await provider.analyze(WORDS, at=1.0)
        with pytest.raises(Exception) as refused:  # noqa: PT011 - the SDK's own error class
            await provider.analyze(WORDS, at=1.0)
    assert "g-secret-key" not in str(refused.value)


def test_a_label_outside_the_53_is_kept_for_the_state_to_count_never_guessed():
    parsed = parse_language_scores(scores({"Anger": 0.6, "Schadenfreude": 0.9}))
    state = EmotionalState(clock=lambda: 2.0)
    state.add(reading_from(parsed, at=1.0))
    assert state.unknown_labels == 1 and state.snapshot().words_dominant == "Anger"


async def test_without_a_fast_model_key_the_words_are_read_offline():
    assert text_provider().name == "local"
    assert text_provider(google_api_key="g", emotion_text_provider="local").name == "local"


def test_a_junk_answer_is_described_without_repeating_it():
    echo = json.dumps({"emotions": "Jane Smith, born 1948, sounds upset", "sentiment": [1] * 9,
                       "toxicity": NO_TOXICITY})
    with pytest.raises(ValueError) as error:
        parse_language_scores(echo)
    assert "emotions" in str(error.value) and "Jane" not in str(error.value)
    with pytest.raises(ValueError) as error:
        parse_language_scores("Jane Smith sounds upset")
    assert "not JSON" in str(error.value) and "Jane" not in str(error.value)
