"""The capacity benchmark's verdicts: which level held, the calls sustained, ours ÷ bare,
and how a box's calls are shared out and merged."""

import math

from bench.box import merge, split
from bench.call_driver import CallResult, LevelRun
from bench.capacity import (
    LevelRow,
    Sustained,
    capacity_ratio,
    climb,
    level_row,
    stopped,
    sustained,
)


def row(calls: int, *, vs_one_call: float = 1.2, answered: int | None = None) -> LevelRow:
    expected = calls * 3
    return LevelRow(
        calls=calls, p50_ms=300.0, p95_ms=300.0 * vs_one_call, p95_vs_one_call=vs_one_call,
        after_decision_p95_ms=10.0, rss_per_call_kib=1024,
        answered=expected if answered is None else answered, expected=expected,
        fallback_turns=0, wall_s=30.0, cpu_ms_per_audio_s=60.0,
    )


def test_a_level_holds_only_with_every_turn_answered_and_p95_under_twice_one_calls():
    assert row(10).held
    assert not row(10, vs_one_call=2.0).held
    assert not row(10, answered=29).held
    assert not row(10, vs_one_call=math.nan).held  # no turn the model closed: nothing to show


def test_a_level_row_compares_p95_with_one_call_and_spreads_memory_and_cpu_over_the_calls():
    level = level_row(
        2, 3, model_closed_ms=[300, 320, 340, 900], after_decision_ms=[5, 8, 30],
        answered=6, fallback_turns=2, rss_growth_kib=4096, wall_s=25.0,
        one_call_p95_ms=450.0, cpu_s=1.5, audio_s=30.0,
    )
    assert (level.p95_ms, level.p95_vs_one_call) == (900, 2.0)
    assert not level.held
    assert (level.expected, level.rss_per_call_kib, level.cpu_ms_per_audio_s) == (6, 2048, 50.0)


def test_calls_sustained_are_the_most_before_the_first_level_that_failed():
    assert sustained([row(10), row(20), row(25, vs_one_call=2.4), row(30)]) == Sustained(
        20, bounded=True, failed_at=25)
    assert sustained([row(10, answered=0)]).text() == "< 10 (the first level failed)"
    unbounded = sustained([row(10), row(20)])
    assert (unbounded.text(), unbounded.meets(20), unbounded.meets(25)) == ("≥ 20", True, False)


def test_a_series_stops_after_two_failed_levels_in_a_row():
    failed = row(30, vs_one_call=3.0)
    assert not stopped([row(10), failed])
    assert not stopped([failed, row(40)])
    assert stopped([row(10), failed, row(40, answered=0)])


async def test_climbing_interleaves_the_series_and_drops_each_once_it_has_stopped():
    capacity = {"bare": 30, "ours": 15}
    measured = []

    async def measure(name: str, calls: int) -> LevelRow:
        measured.append((name, calls))
        return row(calls, vs_one_call=1.1 if calls <= capacity[name] else 2.5)

    rows = await climb([10, 20, 30, 40, 50, 60], ["bare", "ours"], measure)
    assert measured[:4] == [("bare", 10), ("ours", 10), ("bare", 20), ("ours", 20)]
    assert [r.calls for r in rows["ours"]] == [10, 20, 30]
    assert [r.calls for r in rows["bare"]] == [10, 20, 30, 40, 50]
    assert (sustained(rows["ours"]).calls, sustained(rows["bare"]).calls) == (10, 30)


def test_the_ratio_says_which_side_of_the_truth_it_lies_when_a_series_never_failed():
    exact = capacity_ratio(Sustained(20, True), Sustained(25, True))
    assert (exact.text(), exact.meets(0.8)) == ("0.80", True)
    ours_unsaturated = capacity_ratio(Sustained(40, False), Sustained(45, True))
    assert ours_unsaturated.text() == "≥ 0.89" and ours_unsaturated.meets(0.8)
    bare_unsaturated = capacity_ratio(Sustained(20, True), Sustained(20, False))
    assert bare_unsaturated.text() == "≤ 1.00" and not bare_unsaturated.meets(0.8)
    assert not capacity_ratio(Sustained(20, False), Sustained(20, False)).meets(0.8)
    assert capacity_ratio(Sustained(10, True), Sustained(0, True)).text() == "n/a"


def test_a_box_shares_calls_out_evenly_and_adds_up_what_its_processes_measured():
    assert split(5, 2) == [3, 2] and split(1, 2) == [1, 0] and sum(split(61, 4)) == 61
    first = LevelRun(CallResult(latencies_ms=[300.0], model_closed_ms=[300.0]), 2048, 20.0, 1.0)
    second = LevelRun(CallResult(latencies_ms=[400.0], fallback_turns=1), 1024, 22.0, 2.0)
    merged = merge([first, second])
    assert merged.result.latencies_ms == [300.0, 400.0] and merged.result.fallback_turns == 1
    assert (merged.rss_growth_kib, merged.wall_s, merged.cpu_s) == (3072, 22.0, 3.0)
