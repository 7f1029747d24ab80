"""eSpeak NG speaks offline: real audio, ordered word timings, prompt aborts, phonemes."""

import numpy as np
import pytest

from services.espeak.engine import (
    EspeakEngine,
    EspeakError,
    SynthesisChunk,
    VoiceShape,
    resample_pcm,
    synthesize_pcm,
    synthesize_script,
)

pytestmark = pytest.mark.timeout(20)

SENTENCE = "I would like to book an appointment for Tuesday morning."


def speak(text: str, **kwargs) -> tuple[bytes, list, object]:
    chunks: list[SynthesisChunk] = []
    result = EspeakEngine.shared().synthesize(text, on_chunk=chunks.append, **kwargs)
    return b"".join(c.audio for c in chunks), [w for c in chunks for w in c.words], result


def rms(pcm: bytes) -> float:
    return float(np.sqrt(np.mean(np.frombuffer(pcm, dtype="<i2").astype(np.float64) ** 2)))


def test_a_sentence_becomes_audible_speech_of_plausible_length():
    engine = EspeakEngine.shared()
    audio, _, result = speak(SENTENCE)
    seconds = len(audio) / 2 / engine.native_sample_rate
    assert engine.native_sample_rate == 22050
    assert 2.0 < seconds < 6.0  # ten words at 165 words per minute
    assert rms(audio) > 500
    assert not result.aborted


def test_word_events_follow_the_text_in_order_with_rising_start_times():
    audio, words, _ = speak(SENTENCE)
    duration = len(audio) / 2 / EspeakEngine.shared().native_sample_rate
    assert [w.word for w in words] == SENTENCE.split()
    starts = [w.start_s for w in words]
    assert starts == sorted(starts) and starts[0] < 0.2 and starts[-1] < duration


def test_faster_speech_is_shorter():
    slow, _, _ = speak(SENTENCE, words_per_minute=120)
    fast, _, _ = speak(SENTENCE, words_per_minute=220)
    assert len(fast) < 0.75 * len(slow)


def test_should_stop_aborts_within_a_buffer_and_the_engine_keeps_working():
    long_text = " ".join([SENTENCE] * 30)  # about two minutes of speech
    chunks: list[SynthesisChunk] = []
    result = EspeakEngine.shared().synthesize(
        long_text, on_chunk=chunks.append, should_stop=lambda: len(chunks) >= 3
    )
    assert result.aborted and len(chunks) == 3
    audio, _, after = speak("Still here.")
    assert audio and not after.aborted


def test_an_unknown_voice_is_an_error_not_a_crash():
    with pytest.raises(EspeakError):
        speak("Hello.", voice="no-such-voice")
    audio, _, _ = speak("Hello.")
    assert audio


def test_phonemes_describe_the_words():
    phonemes = EspeakEngine.shared().phonemes("Nguyen appointment")
    assert phonemes.split() == ["n_'u:_j_E_n", "a#_p_'OI_n_t_m_@_n_t"]


async def test_synthesize_pcm_returns_the_whole_utterance_at_the_requested_rate():
    native, _, _ = speak(SENTENCE)
    native_s = len(native) / 2 / EspeakEngine.shared().native_sample_rate
    for rate in (8000, 16000):
        pcm = await synthesize_pcm(SENTENCE, rate)
        assert len(pcm) % 2 == 0 and rms(pcm) > 500
        # eSpeak's trailing pause differs by a few samples between runs: allow 20 ms.
        assert abs(len(pcm) / 2 / rate - native_s) < 0.02


def test_resampling_keeps_the_duration_to_the_sample():
    native, _, _ = speak(SENTENCE)
    samples = len(native) // 2
    for rate in (8000, 16000, 24000):
        resampled = resample_pcm(native, 22050, rate)
        assert abs(len(resampled) // 2 - samples * rate / 22050) <= 1


async def test_a_script_sounds_the_same_every_time_whatever_was_said_before():
    lines = [("I need a checkup tomorrow morning.", {}),
             ("Yes please.", {"words_per_minute": 200, "shape": VoiceShape(80, 90, 180)})]
    first = await synthesize_script(lines, 8000)

    speak("Something else entirely, to move the engine's state on.")
    again = await synthesize_script(lines, 8000)

    assert again == first
    assert len(first) == 2 and all(rms(pcm) > 500 for pcm in first)
