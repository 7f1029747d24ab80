"""Silero VAD and smart-turn v3 with their ONNX sessions loaded once per process.

Pipecat's analyzers load their model in `__init__`: about 47 ms of blocking work
on the event loop for every new call, which delays that caller's greeting and
stalls every other call's audio meanwhile. An ONNX Runtime session is stateless
and safe to run from several threads, so one session serves every call; what is
per call (Silero's recurrent state and audio context, the turn analyzer's audio
buffer, each analyzer's executor thread) stays per call.

The constructors below set exactly what Pipecat 1.14's do (a test compares the
attributes with the stock classes, so an upgrade that adds one fails loudly).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources

import onnxruntime as ort
from pipecat.audio.turn.smart_turn.base_smart_turn import BaseSmartTurn, SmartTurnParams
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState
from pipecat.utils.env import env_truthy

SILERO_MODEL = ("pipecat.audio.vad.data", "silero_vad.onnx")
SMART_TURN_MODEL = ("pipecat.audio.turn.smart_turn.data", "smart-turn-v3.2-cpu.onnx")


def _bundled(package: str, name: str) -> str:
    return str(resources.files(package).joinpath(name))


@lru_cache(maxsize=1)
def _silero_template() -> SileroOnnxModel:
    """One loaded Silero model; calls get shallow copies (shared session, own state)."""
    return SileroOnnxModel(_bundled(*SILERO_MODEL), force_onnx_cpu=True)


@lru_cache(maxsize=1)
def _smart_turn_session() -> ort.InferenceSession:
    """The bundled smart-turn v3 session, with the options Pipecat uses (one thread)."""
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(_bundled(*SMART_TURN_MODEL), sess_options=options)


def load_turn_models() -> None:
    """Load both sessions now (at start-up) so the first call pays nothing."""
    _silero_template()
    _smart_turn_session()


class SharedSileroVADAnalyzer(SileroVADAnalyzer):
    """Silero VAD whose ONNX session is shared by every call, run on the event loop.

    Pipecat hands every 20 ms frame to a per-call thread. The model needs about 80 µs
    per frame, but each hand-off needs the GIL twice; with dozens of calls the
    hand-offs queue behind each other for longer than a frame lasts, VAD falls
    behind real time and stops hearing callers (measured: no second turn answered
    at 50 calls). Inline, the same work costs the loop about 4 ms per second of call.
    """

    def __init__(self, *, sample_rate: int | None = None, params: VADParams | None = None):
        VADAnalyzer.__init__(self, sample_rate=sample_rate, params=params)
        model = copy.copy(_silero_template())
        model.reset_states()
        self._model = model
        self._windows_since_reset = 0
        self._low_confidence_windows = 0

    async def analyze_audio(self, buffer: bytes) -> VADState:
        return self._run_analyzer(buffer)


class SharedSmartTurnAnalyzerV3(LocalSmartTurnAnalyzerV3):
    """Smart-turn v3 end-of-turn model whose ONNX session is shared by every call."""

    def __init__(self, *, sample_rate: int | None = None, params: SmartTurnParams | None = None):
        BaseSmartTurn.__init__(self, sample_rate=sample_rate, params=params)
        self._log_data = env_truthy("PIPECAT_SMART_TURN_LOG_DATA", default=False)
        self._session = _smart_turn_session()
