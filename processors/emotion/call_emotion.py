"""One call's emotional intelligence: the state, provider health and what it chose.

Created per call when the workspace has emotion enabled and handed to the emotion
processors through `CallSession.emotion`. The tap writes readings into `state`; steering,
the tone chain and fillers read `snapshot()`; the summary is stored when the call ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from processors.emotion.breaker import BreakerState, CircuitBreaker
from processors.emotion.fillers import FillerPicker, LatencyEstimate
from processors.emotion.state import EmotionalState, EmotionalSummary, EmotionSnapshot, Trend

# What each kind of work is expected to take before a turn has measured it (ms).
LATENCY_PRIORS = {"navigator_model": 700.0, "engage_llm": 900.0, "offline_turn": 20.0,
                  "audio_verification": 1200.0}


@dataclass
class CallEmotion:
    state: EmotionalState = field(default_factory=EmotionalState)
    fillers: FillerPicker = field(default_factory=FillerPicker)
    latency: LatencyEstimate = field(default_factory=lambda: LatencyEstimate(LATENCY_PRIORS))
    summary: EmotionalSummary = field(default_factory=EmotionalSummary)
    tone: str | None = None  # the last agent turn's (tone momentum)
    steering: str | None = None  # the last steering block sent
    reply_requested_at: float | None = None  # when the engage LLM was asked (its latency)
    started: float = field(default_factory=time.monotonic)
    clock: Callable[[], float] = time.monotonic
    _last_trend: Trend | None = None

    def breaker(self, channel: str, on_change: Callable[[BreakerState, str], None]) -> CircuitBreaker:
        """A circuit breaker for one provider channel (audio, text), reporting changes."""

        def changed(state: BreakerState, reason: str) -> None:
            self.summary.provider_health[channel] = state.value
            on_change(state, reason)

        self.summary.provider_health[channel] = BreakerState.CLOSED.value
        return CircuitBreaker(clock=self.clock, on_change=changed)

    def snapshot(self) -> EmotionSnapshot:
        return self.state.snapshot()

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def note_turn(self, snapshot: EmotionSnapshot) -> None:
        """A caller turn: its emotion joins the trajectory; trend changes are kept."""
        if snapshot.dominant is None:
            return
        summary = self.summary
        summary.trajectory.append({
            "at_s": round(self.elapsed_s(), 1), "dominant": snapshot.dominant,
            "valence": snapshot.valence, "arousal": snapshot.arousal,
        })
        summary.dominant_counts[snapshot.dominant] = (
            summary.dominant_counts.get(snapshot.dominant, 0) + 1)
        if snapshot.steerable and snapshot.trend is not self._last_trend:
            if self._last_trend is not None:
                summary.trend_changes.append({"at_s": round(self.elapsed_s(), 1),
                                              "trend": snapshot.trend.value})
            self._last_trend = snapshot.trend
        if snapshot.steerable and snapshot.masking:
            summary.coherence_alerts += 1

    def summary_record(self) -> dict[str, Any]:
        """The call's emotional summary, as stored in calls.emotional_summary."""
        self.summary.bursts = dict(self.state.bursts)
        self.summary.toxicity_peaks = dict(self.state.toxicity_peaks)
        record = asdict(self.summary)
        record["unknown_labels"] = self.state.unknown_labels
        return record
