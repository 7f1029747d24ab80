"""Shared VAD / end-of-turn sessions behave exactly like Pipecat's own analyzers, per call."""

import numpy as np
import pytest
from pipecat.audio.turn.smart_turn.base_smart_turn import SmartTurnParams
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams, VADState

from services.espeak import synthesize_pcm
from services.turn_models import SharedSileroVADAnalyzer, SharedSmartTurnAnalyzerV3

RATE = 8000
WINDOW_BYTES = 256 * 2  # Silero's window at 8 kHz


@pytest.fixture(scope="module")
async def speech() -> bytes:
    pcm = await synthesize_pcm("I need to move my appointment to Friday afternoon.", RATE)
    return b"\x00" * RATE + pcm + b"\x00" * RATE  # a second of silence either side


def confidences(analyzer, pcm: bytes) -> list[float]:
    analyzer.set_sample_rate(RATE)
    usable = len(pcm) - len(pcm) % WINDOW_BYTES
    return [
        np.asarray(analyzer.voice_confidence(pcm[i : i + WINDOW_BYTES])).item()
        for i in range(0, usable, WINDOW_BYTES)
    ]


def test_the_shared_analyzers_have_exactly_pipecats_attributes():
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    assert set(vars(SharedSileroVADAnalyzer(params=params))) == set(
        vars(SileroVADAnalyzer(params=params))
    )
    turn = SmartTurnParams(stop_secs=1.5)
    assert set(vars(SharedSmartTurnAnalyzerV3(params=turn))) == set(
        vars(LocalSmartTurnAnalyzerV3(params=turn))
    )


def test_shared_vad_hears_speech_exactly_as_pipecats_vad(speech):
    ours = confidences(SharedSileroVADAnalyzer(), speech)
    stock = confidences(SileroVADAnalyzer(), speech)
    assert np.allclose(ours, stock, atol=1e-6)
    assert max(ours) > 0.9 and ours[0] < 0.1  # speech in the middle, silence first


def test_two_calls_keep_their_own_vad_state(speech):
    alone = confidences(SharedSileroVADAnalyzer(), speech)
    caller_a, caller_b = SharedSileroVADAnalyzer(), SharedSileroVADAnalyzer()
    caller_a.set_sample_rate(RATE)
    caller_b.set_sample_rate(RATE)
    silence = b"\x00" * WINDOW_BYTES
    interleaved = []
    for i in range(0, len(alone) * WINDOW_BYTES, WINDOW_BYTES):
        caller_a.voice_confidence(silence)  # another call's audio between every window
        interleaved.append(np.asarray(caller_b.voice_confidence(speech[i : i + WINDOW_BYTES])).item())
    assert np.allclose(interleaved, alone, atol=1e-6)


def test_shared_end_of_turn_model_predicts_like_pipecats(speech):
    audio = np.frombuffer(speech, dtype="<i2").astype(np.float32) / 32768.0
    ours, stock = SharedSmartTurnAnalyzerV3(), LocalSmartTurnAnalyzerV3()
    ours.set_sample_rate(RATE)
    stock.set_sample_rate(RATE)
    assert ours._predict_endpoint(audio) == pytest.approx(stock._predict_endpoint(audio))


async def test_shared_vad_reaches_the_same_states_as_pipecats_without_a_thread_hop(speech):
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    ours, stock = SharedSileroVADAnalyzer(params=params), SileroVADAnalyzer(params=params)
    for analyzer in (ours, stock):
        analyzer.set_sample_rate(RATE)
    frame = RATE * 2 * 20 // 1000
    states = [
        (await ours.analyze_audio(speech[i : i + frame]), await stock.analyze_audio(speech[i : i + frame]))
        for i in range(0, len(speech) - frame, frame)
    ]
    assert all(a == b for a, b in states)
    assert {a for a, _ in states} >= {VADState.QUIET, VADState.SPEAKING}
