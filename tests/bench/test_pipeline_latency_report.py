"""The pipeline-latency section states each target met or not, from what the run measured."""

from bench.call_driver import FAKE, LOCAL
from bench.cpu_profile import profile_rows
from bench.pipeline_latency_report import Run, render
from tests.bench.test_capacity import row


def stats(p95: float) -> dict:
    return {"p50": p95 - 10, "p95": p95, "n": 20}


def measured_run(*, added_p95: float, box: list, local_box: list) -> Run:
    clocks = {
        clock: {"bare": stats(base), "ours": stats(base + added_p95), "added_p50": added_p95,
                "added_p95": added_p95, "ratio_p95": (base + added_p95) / base}
        for clock, base in (("after_decision", 10.0), ("perceived", 350.0))
    }
    return Run(
        turns=20, added={"turns": 20, "fallback_turns": {"bare": 2, "ours": 3}, **clocks},
        per_process={"bare": [row(10), row(20), row(25, vs_one_call=2.5)],
                     "ours": [row(10), row(20, vs_one_call=2.2), row(25, vs_one_call=2.5)]},
        processes=2, decoders_per_process=1, box=box, local_box=local_box,
        local_one_call_p95_ms=900.0, profile_calls={FAKE: 10, LOCAL: 5},
        profiles={voices: {"ours": profile_rows({"LLMUserAggregator": 9, "Silero VAD": 12}, 1e-6),
                           "bare": profile_rows({"LLMUserAggregator": 8, "Silero VAD": 12}, 1e-6)}
                  for voices in (FAKE, LOCAL)},
        unhooked_cpu={"ours": 60.0, "bare": 55.0}, hooks_cpu={FAKE: {"ours": 5.0, "bare": 4.0}},
        load=[("start", (1.2, 1.0, 0.8)), ("end", (1.9, 1.5, 1.0))], minutes=17.0,
    )


def test_each_target_is_stated_met_or_not_met():
    section = render(measured_run(
        added_p95=3.0, box=[row(40), row(50), row(60, vs_one_call=2.5)],
        local_box=[row(5), row(10), row(15, answered=40)],
    ))
    assert "Added latency after the turn decision < 5 ms p95: **met** (+3.0 ms)" in section
    assert "Ours ≥ 50 sustained calls per box, fake voices: **met** (50)" in section
    assert "Ours ≥ 20 sustained calls per box, offline voices: **NOT met** (10)" in section
    assert "ours ÷ bare ≥ 0.8 (sustained calls per process, fake voices): **NOT met** (0.50)" in (
        section)


def test_a_run_without_the_box_series_does_not_claim_their_targets():
    section = render(measured_run(added_p95=7.0, box=[], local_box=[]))
    assert "< 5 ms p95: **NOT met** (+7.0 ms)" in section
    assert "fake voices: **NOT met**" in section and "offline voices: **NOT met**" in section
    assert "| LLMUserAggregator |" in section and "### (c) Calls per box" in section
    assert "the hooks' cost taken out: ours 5.0, bare 4.0 ms/s" in section
