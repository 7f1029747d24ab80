"""Shared VAD / end-of-turn sessions behave exactly like Pipecat's own analyzers, per call."""

import asyncio

import numpy as np
import pytest
from pipecat.audio.turn.smart_turn.base_smart_turn import SmartTurnParams
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams, VADState

from services import turn_models
from services.espeak.engine import synthesize_pcm
from services.turn_models import (
    SharedSileroVADAnalyzer,
    SharedSmartTurnAnalyzerV3,
    SileroStream,
    score_windows,
)

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


async def vad_states(analyzer, pcm: bytes) -> list[VADState]:
    """The VAD state after each 20 ms frame, as Pipecat's VAD controller asks for it."""
    analyzer.set_sample_rate(RATE)
    frame = RATE * 2 * 20 // 1000
    return [
        await analyzer.analyze_audio(pcm[i : i + frame]) for i in range(0, len(pcm) - frame, frame)
    ]


def test_the_shared_analyzers_have_exactly_pipecats_attributes():
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    assert set(vars(SharedSileroVADAnalyzer(params=params))) == set(
        vars(SileroVADAnalyzer(params=params))
    ) | {"_scored"}
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
        window = speech[i : i + WINDOW_BYTES]
        interleaved.append(np.asarray(caller_b.voice_confidence(window)).item())
    assert np.allclose(interleaved, alone, atol=1e-6)


def test_shared_end_of_turn_model_predicts_like_pipecats(speech):
    audio = np.frombuffer(speech, dtype="<i2").astype(np.float32) / 32768.0
    ours, stock = SharedSmartTurnAnalyzerV3(), LocalSmartTurnAnalyzerV3()
    ours.set_sample_rate(RATE)
    stock.set_sample_rate(RATE)
    assert ours._predict_endpoint(audio) == pytest.approx(stock._predict_endpoint(audio))


async def test_shared_vad_reaches_the_same_states_as_pipecats_without_a_thread_hop(speech):
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    ours = await vad_states(SharedSileroVADAnalyzer(params=params), speech)
    assert ours == await vad_states(SileroVADAnalyzer(params=params), speech)
    assert set(ours) >= {VADState.QUIET, VADState.SPEAKING}


def windows_of(pcm: bytes) -> list[bytes]:
    return [pcm[i : i + WINDOW_BYTES] for i in range(0, len(pcm) - WINDOW_BYTES + 1, WINDOW_BYTES)]


def test_one_batched_run_scores_each_call_as_if_it_ran_alone(speech):
    session = turn_models._silero_session()
    silence = b"\x00" * len(speech)
    calls = [speech, silence, speech[::-1]]  # three callers at different points of their audio
    alone = [
        [score_windows(session, [stream], [w], RATE)[0] for w in windows_of(pcm)]
        for pcm, stream in ((pcm, SileroStream()) for pcm in calls)
    ]
    streams = [SileroStream() for _ in calls]
    steps = zip(*map(windows_of, calls), strict=True)  # every call's next window, together
    together = [score_windows(session, streams, list(step), RATE) for step in steps]
    assert np.allclose(np.array(together).T, np.array(alone), atol=1e-5)
    assert max(alone[0]) > 0.9 and max(alone[1]) < 0.1


async def test_concurrent_calls_share_runs_and_each_hears_its_own_caller(speech, monkeypatch):
    runs = []
    score = turn_models.score_windows
    monkeypatch.setattr(
        turn_models, "score_windows", lambda *a: runs.append(len(a[1])) or score(*a)
    )
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    stock = await vad_states(SileroVADAnalyzer(params=params), speech)
    quiet = b"\x00" * len(speech)
    talking, silent = await asyncio.gather(
        vad_states(SharedSileroVADAnalyzer(params=params), speech),
        vad_states(SharedSileroVADAnalyzer(params=params), quiet),
    )
    assert talking == stock
    assert set(silent) == {VADState.QUIET}
    assert max(runs) == 2  # both calls' windows went into the same runs


async def test_a_failed_batch_run_is_scored_alone_and_the_vad_still_hears(speech, monkeypatch):
    class BrokenBatcher:
        async def score(self, *_):
            raise RuntimeError("onnx failure")

    monkeypatch.setattr(turn_models, "silero_batcher", lambda: BrokenBatcher())
    params = VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.2)
    assert await vad_states(SharedSileroVADAnalyzer(params=params), speech) == await vad_states(
        SileroVADAnalyzer(params=params), speech
    )
