"""Silero VAD and smart-turn v3 with their ONNX sessions loaded once per process.

Pipecat's analyzers load their model in `__init__`: about 47 ms of blocking work
on the event loop for every new call, which delays that caller's greeting and
stalls every other call's audio meanwhile. An ONNX Runtime session is stateless
and safe to run from several threads, so one session serves every call; what is
per call (Silero's recurrent state and audio context, the turn analyzer's audio
buffer, each analyzer's executor thread) stays per call.

The constructors below set exactly what Pipecat 1.14's do, plus the batched VAD
score (a test compares the attributes with the stock classes, so an upgrade that
adds one fails loudly).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np
import onnxruntime as ort
from loguru import logger
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
def _silero_session() -> ort.InferenceSession:
    """The bundled Silero session, with the options Pipecat uses (CPU, one thread)."""
    return SileroOnnxModel(_bundled(*SILERO_MODEL), force_onnx_cpu=True).session


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
    _silero_session()
    _smart_turn_session()


@dataclass
class SileroStream:
    """One call's Silero recurrent state and audio context (what `SileroOnnxModel` keeps)."""

    state: np.ndarray = field(default_factory=lambda: np.zeros((2, 1, 128), dtype=np.float32))
    context: np.ndarray | None = None

    def reset_states(self) -> None:
        """Forget the past (Pipecat resets the model during clear non-speech)."""
        self.state = np.zeros((2, 1, 128), dtype=np.float32)
        self.context = None


def score_windows(
    session: ort.InferenceSession,
    streams: list[SileroStream],
    windows: list[bytes],
    sample_rate: int,
) -> list[float]:
    """Speech confidence of one window per stream, all in one ONNX run; advances each stream.

    The same computation as `SileroOnnxModel.__call__` (each window is prefixed by
    the end of that stream's previous one), with the calls stacked on the batch axis.
    """
    context_size = 64 if sample_rate == 16000 else 32
    rows = []
    for stream, window in zip(streams, windows, strict=True):
        audio = (np.frombuffer(window, np.int16).astype(np.float32) / 32768.0)[None, :]
        context = stream.context
        if context is None:
            context = np.zeros((1, context_size), np.float32)
        rows.append(np.concatenate((context, audio), axis=1))
    batch = np.concatenate(rows, axis=0)
    state = np.concatenate([stream.state for stream in streams], axis=1)
    output, state_n = session.run(
        None, {"input": batch, "state": state, "sr": np.array(sample_rate, dtype=np.int64)}
    )
    for index, stream in enumerate(streams):
        stream.state = np.ascontiguousarray(state_n[:, index : index + 1, :])
        stream.context = batch[index : index + 1, -context_size:].copy()
    return [float(value) for value in output[:, 0]]


class SileroBatcher:
    """Scores the windows every call asks for within one event-loop pass in one ONNX run.

    A Silero run costs about 65 µs whether it scores one call's window or several
    (a batch of 50 costs about 22 µs per window), and with dozens of calls that
    per-run cost was a fifth of the event loop's time. Under load each loop pass
    serves many calls, so batches grow with the load that makes them pay.
    """

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session = session
        self._pending: dict[int, list[tuple[SileroStream, bytes, asyncio.Future[float]]]] = {}

    async def score(self, stream: SileroStream, window: bytes, sample_rate: int) -> float:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[float] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.setdefault(sample_rate, []).append((stream, window, future))
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for sample_rate, requests in pending.items():
            streams = [stream for stream, _, _ in requests]
            windows = [window for _, window, _ in requests]
            try:
                scores = score_windows(self._session, streams, windows, sample_rate)
            except Exception as error:  # noqa: BLE001 - each caller falls back to scoring alone
                for _, _, future in requests:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, _, future), score in zip(requests, scores, strict=True):
                if not future.done():
                    future.set_result(score)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SileroBatcher] = (
    weakref.WeakKeyDictionary()
)


def silero_batcher() -> SileroBatcher:
    """The batcher of the running event loop (one per loop: futures belong to their loop)."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = SileroBatcher(_silero_session())
    return batcher


class SharedSileroVADAnalyzer(SileroVADAnalyzer):
    """Silero VAD on the event loop, its windows scored together with other calls'.

    Pipecat hands every 20 ms frame to a per-call thread. The model needs about 80 µs
    per frame, but each hand-off needs the GIL twice; with dozens of calls the
    hand-offs queue behind each other for longer than a frame lasts, VAD falls
    behind real time and stops hearing callers (measured: no second turn answered
    at 50 calls). Here a frame that completes a window has it scored by the loop's
    `SileroBatcher`, then Pipecat's own state machine runs on that score, so the
    VAD decides exactly as Pipecat's does (tests compare them).
    """

    def __init__(self, *, sample_rate: int | None = None, params: VADParams | None = None):
        VADAnalyzer.__init__(self, sample_rate=sample_rate, params=params)
        self._model = SileroStream()
        self._windows_since_reset = 0
        self._low_confidence_windows = 0
        self._scored: float | None = None  # the batched score of the window this frame completes

    async def analyze_audio(self, buffer: bytes) -> VADState:
        window_bytes = self._vad_frames_num_bytes
        if (len(self._vad_buffer) + len(buffer)) // window_bytes == 1:
            window = (self._vad_buffer + buffer)[:window_bytes]
            try:
                self._scored = await silero_batcher().score(self._model, window, self.sample_rate)
            except Exception as error:  # noqa: BLE001 - scored alone below instead
                logger.warning(f"batched Silero run failed ({type(error).__name__}); scoring alone")
        # Frames that complete several windows at once (40 ms and longer) are scored
        # window by window, so each model reset still lands between two windows.
        return self._run_analyzer(buffer)

    def voice_confidence(self, buffer: bytes) -> float:
        confidence, self._scored = self._scored, None
        if confidence is None:
            try:
                session = _silero_session()
                confidence = score_windows(session, [self._model], [buffer], self.sample_rate)[0]
            except Exception as error:  # noqa: BLE001 - as Pipecat: an unscorable window is silence
                logger.error(f"Error analyzing audio with Silero VAD: {error}")
                return 0.0
        self._maybe_reset_model(confidence)
        return confidence


class SharedSmartTurnAnalyzerV3(LocalSmartTurnAnalyzerV3):
    """Smart-turn v3 end-of-turn model whose ONNX session is shared by every call."""

    def __init__(self, *, sample_rate: int | None = None, params: SmartTurnParams | None = None):
        BaseSmartTurn.__init__(self, sample_rate=sample_rate, params=params)
        self._log_data = env_truthy("PIPECAT_SMART_TURN_LOG_DATA", default=False)
        self._session = _smart_turn_session()
