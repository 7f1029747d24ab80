"""Capacity arithmetic: a level's row, whether it held, the calls sustained, ours ÷ bare.

A level holds when every turn was answered and the caller-perceived p95 stayed under
twice one call's; the calls sustained are the most measured before the first level
that did not hold. A series whose every level held has a capacity of at least its
top level, not exactly that: the ratio and the verdicts say so.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bench.report import percentile

# p95 this many times one call's is no longer "sustained".
P95_LIMIT_VS_ONE_CALL = 2.0
# A series stops climbing after this many levels in a row did not hold.
FAILS_TO_STOP = 2


@dataclass(frozen=True)
class LevelRow:
    calls: int
    p50_ms: float
    p95_ms: float
    p95_vs_one_call: float
    after_decision_p95_ms: float
    rss_per_call_kib: int
    answered: int
    expected: int
    fallback_turns: int
    wall_s: float
    cpu_ms_per_audio_s: float  # CPU per call per second of caller audio
    load: float = math.nan  # the machine's 1-minute load average as the level ended


    @property
    def held(self) -> bool:
        """Every turn answered and p95 under twice one call's (a NaN p95 does not hold)."""
        return self.answered == self.expected and self.p95_vs_one_call < P95_LIMIT_VS_ONE_CALL


def level_row(
    calls: int, turns: int, *, model_closed_ms: Sequence[float], after_decision_ms: Sequence[float],
    answered: int, fallback_turns: int, rss_growth_kib: int, wall_s: float, one_call_p95_ms: float,
    cpu_s: float, audio_s: float, load: float = math.nan,
) -> LevelRow:
    """`audio_s`: the caller audio all the level's calls spoke."""
    p95 = percentile(list(model_closed_ms), 95)
    return LevelRow(
        calls=calls, p50_ms=percentile(list(model_closed_ms), 50), p95_ms=p95,
        p95_vs_one_call=p95 / one_call_p95_ms, after_decision_p95_ms=percentile(
            list(after_decision_ms), 95),
        rss_per_call_kib=rss_growth_kib // max(calls, 1), answered=answered,
        expected=calls * turns, fallback_turns=fallback_turns, wall_s=wall_s,
        cpu_ms_per_audio_s=cpu_s * 1000 / audio_s, load=load,
    )


@dataclass(frozen=True)
class Sustained:
    calls: int
    bounded: bool  # False: every level measured held, the capacity is at least `calls`
    failed_at: int | None = None  # the first level that did not hold

    def text(self) -> str:
        if not self.bounded:
            return f"≥ {self.calls}"
        return f"{self.calls}" if self.calls else f"< {self.failed_at} (the first level failed)"

    def meets(self, target: int) -> bool:
        return self.calls >= target


def sustained(rows: Sequence[LevelRow]) -> Sustained:
    """The most calls measured before the first level that did not hold."""
    calls = 0
    for row in rows:
        if not row.held:
            return Sustained(calls, bounded=True, failed_at=row.calls)
        calls = row.calls
    return Sustained(calls, bounded=False)


def stopped(rows: Sequence[LevelRow], fails: int = FAILS_TO_STOP) -> bool:
    """The last `fails` levels all failed to hold: climbing further only spends time."""
    return len(rows) >= fails and not any(row.held for row in rows[-fails:])


@dataclass(frozen=True)
class Ratio:
    """Ours ÷ bare sustained calls, with which side of the true ratio it lies on."""

    value: float
    bound: str  # "": exact; "≥": ours never saturated; "≤": bare never did; "?": neither did

    def text(self) -> str:
        if math.isnan(self.value):
            return "n/a"
        return f"{self.bound} {self.value:.2f}".strip() if self.bound != "?" else (
            f"{self.value:.2f} (neither saturated)")

    def meets(self, target: float) -> bool:
        """True only when the measurement shows the target met, not merely possible."""
        return self.value >= target and self.bound in ("", "≥")


def capacity_ratio(ours: Sustained, bare: Sustained) -> Ratio:
    if bare.calls == 0:
        return Ratio(float("nan"), "?")
    value = ours.calls / bare.calls
    if ours.bounded and bare.bounded:
        return Ratio(value, "")
    if bare.bounded:
        return Ratio(value, "≥")
    return Ratio(value, "≤" if ours.bounded else "?")


async def climb(
    levels: Sequence[int], series: Sequence[str],
    measure: Callable[[str, int], Awaitable[LevelRow]],
) -> dict[str, list[LevelRow]]:
    """Each series at each level in turn, interleaved so load drifts affect them alike;
    a series stops once it has failed FAILS_TO_STOP levels in a row."""
    rows: dict[str, list[LevelRow]] = {name: [] for name in series}
    for calls in levels:
        for name in series:
            if not stopped(rows[name]):
                rows[name].append(await measure(name, calls))
    return rows


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"
