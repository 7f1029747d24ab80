"""libespeak-ng is one global state per process: a second engine must not break the shared one."""

import pytest

from services.espeak.engine import EspeakEngine, SynthesisChunk

pytestmark = pytest.mark.timeout(20)


def speak(engine: EspeakEngine, text: str, **kwargs) -> list[SynthesisChunk]:
    chunks: list[SynthesisChunk] = []
    result = engine.synthesize(text, on_chunk=chunks.append, **kwargs)
    assert not result.aborted
    return chunks


def test_engines_take_turns_with_the_library_and_each_gets_its_own_audio():
    shared, other = EspeakEngine.shared(), EspeakEngine()
    before = speak(shared, "Good morning.")
    with_other_voice = speak(other, "Good morning.", voice="en-us+f3", words_per_minute=220)
    after = speak(shared, "Good morning.")
    lengths = [sum(len(c.audio) for c in chunks) for chunks in (before, with_other_voice, after)]
    # eSpeak carries a little state between utterances, so lengths vary by a few samples.
    assert abs(lengths[0] - lengths[2]) < 0.01 * lengths[0]  # voice and rate were restored
    assert lengths[1] < 0.9 * lengths[0]  # the other engine spoke faster
    assert other.native_sample_rate == shared.native_sample_rate == 22050


def test_phonemes_can_be_asked_from_inside_a_synthesis_callback():
    engine = EspeakEngine.shared()
    seen: list[str] = []

    def on_chunk(chunk: SynthesisChunk) -> None:
        if not seen:  # runs on the engine thread: must not deadlock waiting for itself
            seen.append(engine.phonemes("Nguyen"))

    engine.synthesize("Hello.", on_chunk=on_chunk)
    assert seen == ["n_'u:_j_E_n"]
