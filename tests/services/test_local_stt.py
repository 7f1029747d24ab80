"""PocketSphinx transcribes phone audio offline, in a shared decoder pool, with keyterms."""

import jiwer
import pytest
import yaml
from pipecat.frames.frames import (
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import run_test

from services.espeak.engine import synthesize_pcm
from services.pocketsphinx.pronunciation import CmuDictionary
from services.pocketsphinx.stt import (
    CORPUS_FILE,
    DecoderPool,
    KeytermLexicon,
    PocketSphinxSTTService,
    keyterm_spellings,
    restore_spelling,
    scheduling_corpus,
)

pytestmark = pytest.mark.timeout(30)

RATE = 8000


def caller_frames(pcm: bytes) -> list:
    """What the transport and VAD send a segmented STT: speech between VAD events, 20 ms frames."""
    frames: list = [VADUserStartedSpeakingFrame()]
    frames += [InputAudioRawFrame(pcm[i : i + 320], RATE, 1) for i in range(0, len(pcm), 320)]
    frames.append(VADUserStoppedSpeakingFrame())
    return frames


async def transcripts(stt: PocketSphinxSTTService, pcm: bytes) -> list[TranscriptionFrame]:
    params = PipelineParams(audio_in_sample_rate=RATE)
    down, _ = await run_test(stt, frames_to_send=caller_frames(pcm), pipeline_params=params)
    return [f for f in down if isinstance(f, TranscriptionFrame)]


def test_every_word_of_the_scheduling_corpus_has_a_pronunciation():
    spec = yaml.safe_load(CORPUS_FILE.read_text())
    corpus = scheduling_corpus(spec)
    assert corpus == scheduling_corpus(spec)  # deterministic, so cached models stay valid
    dictionary = CmuDictionary.bundled()
    assert sorted({w for s in corpus for w in s.split()} - set(dictionary._entries)) == []


async def test_a_booking_request_survives_the_round_trip_through_speech():
    reference = "i would like to book an appointment"
    pcm = await synthesize_pcm("I would like to book an appointment", RATE)
    result = await DecoderPool.shared().transcribe(pcm, RATE)
    assert jiwer.wer(reference, result.text) <= 0.15
    assert result.decode_seconds < result.audio_seconds  # faster than real time


async def test_an_unknown_drug_name_is_recognised_once_it_is_a_keyterm():
    pool = DecoderPool(size=1)  # private: keyterms added here must not leak into the shared pool
    try:
        pcm = await synthesize_pcm("I need a refill of Ozempic", RATE)
        before = await pool.transcribe(pcm, RATE)
        pronunciations = KeytermLexicon.pronunciations(["Ozempic"], pool.vocabulary)
        after = await pool.transcribe(pcm, RATE, pronunciations)
    finally:
        pool.shutdown()
    assert "ozempic" not in before.text.split()
    assert after.text == "i need a refill of ozempic"


def test_keyterms_already_known_need_no_new_pronunciation_and_titles_are_spoken():
    vocabulary = DecoderPool.shared().vocabulary
    pronunciations = KeytermLexicon.pronunciations(["Dr. Nguyen", "Ozempic"], vocabulary)
    assert [p.word for p in pronunciations] == ["ozempic"]


def test_transcripts_use_the_keyterm_spelling():
    spellings = keyterm_spellings(["Ozempic", "Dr. Nguyen"])
    restored = restore_spelling("a refill of ozempic for nguyen", spellings)
    assert restored == "a refill of Ozempic for Nguyen"


async def test_the_service_turns_a_vad_segment_into_one_final_transcription():
    pcm = await synthesize_pcm("I need a refill of Ozempic", RATE)
    frames = await transcripts(PocketSphinxSTTService(keyterms=["Ozempic"]), pcm)
    assert len(frames) == 1
    assert frames[0].text == "i need a refill of Ozempic" and frames[0].finalized


async def test_silence_produces_no_transcription():
    assert await transcripts(PocketSphinxSTTService(keyterms=[]), bytes(RATE * 2)) == []


async def test_a_decoder_hears_each_segment_alone_whatever_other_calls_said_before():
    """Decoders are pooled across calls: one caller's loud voice must not change how the
    next call's words are normalised (cepstral mean per segment, not carried over)."""
    import services.pocketsphinx.stt as local_stt
    from services.espeak.engine import VoiceShape

    local_stt._start_worker(local_stt.language_model_files("scheduling"))
    decoder = local_stt._worker.decoder

    def score(pcm: bytes) -> float:
        local_stt._decode_segment(pcm, RATE, ())  # each its own call: no mean carried in
        return decoder.hyp().score

    line = await synthesize_pcm("I need a checkup tomorrow morning", RATE)
    fresh = score(line)
    for shouted in ("This is ridiculous, I have been waiting for weeks", "Just book it"):
        score(await synthesize_pcm(shouted, RATE, words_per_minute=200,
                                   shape=VoiceShape(80, 90, 180)))
    assert score(line) == fresh


async def test_a_segment_is_heard_the_same_wherever_voice_activity_opened_and_closed_it():
    """VAD opens a segment a frame or two earlier or later from call to call; the words
    must come out the same (segments are trimmed to their sound)."""
    import services.pocketsphinx.stt as local_stt

    local_stt._start_worker(local_stt.language_model_files("scheduling"))
    line = await synthesize_pcm("I need a checkup tomorrow morning", RATE)
    heard = {
        local_stt._decode_segment(bytes(lead * 2) + line + bytes(tail * 2), RATE, ()).text
        for lead in (320, 1600, 3200, 4480, 5120, 5280, 6400) for tail in (1600, 4000)
    }
    assert len(heard) == 1
