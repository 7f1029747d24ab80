"""The pipeline-latency section of docs/PERFORMANCE.md, from one run of `bench.pipeline_latency`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bench.call_driver import FAKE, LEVEL_TURNS, LOCAL, LOCAL_REPLY, ROUND_TURNS
from bench.capacity import LevelRow, capacity_ratio, sustained, verdict
from bench.cpu_profile import ProfileRow, side_by_side
from bench.report import measured_line

# Targets.
ADDED_P95_MS = 5.0
BOX_CALLS = {FAKE: 50, LOCAL: 20}
RATIO = 0.8


@dataclass
class Run:
    """Everything one run measured."""

    turns: int
    added: dict
    per_process: dict[str, list[LevelRow]]
    processes: int
    decoders_per_process: int
    box: list[LevelRow] = field(default_factory=list)
    local_box: list[LevelRow] = field(default_factory=list)
    local_one_call_p95_ms: float = float("nan")
    profile_calls: dict[str, int] = field(default_factory=dict)
    profiles: dict[str, dict[str, list[ProfileRow]]] = field(default_factory=dict)
    # CPU per call-second (b) measured at the fake voices' profiling level, without hooks.
    unhooked_cpu: dict[str, float] = field(default_factory=dict)
    # The hooks' own cost taken out of each profile, per voices and pipeline (ms/s).
    hooks_cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    load: list[tuple[str, tuple[float, float, float]]] = field(default_factory=list)
    minutes: float = 0.0


def render(run: Run) -> str:
    return "\n".join([
        "## Per-turn latency our pipeline adds, calls per process and per box, and where the CPU goes",
        "",
        measured_line("python -m bench.pipeline_latency"),
        _load_line(run),
        "",
        "Bare Pipecat (transport, STT, user aggregator, LLM, TTS, transport, assistant aggregator) "
        "and ours (`pipeline.factory.build_call_pipeline` with the emotion layers, as production "
        "runs) get the same caller audio (eSpeak NG, 8 kHz, 20 ms frames at real-time pace), the "
        "same instant fake STT, LLM and TTS (`tests/fakes.py`) or the same offline voices, and the "
        "same real Silero VAD + smart-turn v3, with `make run`'s INFO logging.",
        "",
        *_targets(run),
        "",
        *_added(run),
        "",
        *_per_process(run),
        "",
        *_per_box(run),
        "",
        *_profiles(run),
    ])


def _load_line(run: Run) -> str:
    loads = "; ".join(f"{when} {one:.2f} / {five:.2f} / {fifteen:.2f}"
                      for when, (one, five, fifteen) in run.load)
    levels = [row.load for rows in (*run.per_process.values(), run.box, run.local_box)
              for row in rows if not math.isnan(row.load)]
    spread = f" Levels ran at load {min(levels):.1f} to {max(levels):.1f}." if levels else ""
    return (f"The whole run took {run.minutes:.0f} min; load average (1 / 5 / 15 min) "
            f"{loads}.{spread} A level's load (in its table) counts this run's own processes "
            f"(one in (b), {run.processes} and their workers in (c)); above that, other work was "
            f"sharing the {run.processes} CPUs and the level's numbers are worse than a quiet "
            "machine gives.")


def _targets(run: Run) -> list[str]:
    after = run.added["after_decision"]["added_p95"]
    ratio = capacity_ratio(sustained(run.per_process["ours"]), sustained(run.per_process["bare"]))
    box, local_box = sustained(run.box), sustained(run.local_box)
    return [
        "### Targets",
        "",
        f"- Added latency after the turn decision < {ADDED_P95_MS:.0f} ms p95: "
        f"**{verdict(after < ADDED_P95_MS)}** ({after:+.1f} ms).",
        f"- Ours ≥ {BOX_CALLS[FAKE]} sustained calls per box, fake voices: "
        f"**{verdict(bool(run.box) and box.meets(BOX_CALLS[FAKE]))}** ({box.text()}).",
        f"- Ours ≥ {BOX_CALLS[LOCAL]} sustained calls per box, offline voices: "
        f"**{verdict(bool(run.local_box) and local_box.meets(BOX_CALLS[LOCAL]))}** "
        f"({local_box.text()}).",
        f"- Capacity ours ÷ bare ≥ {RATIO} (sustained calls per process, fake voices): "
        f"**{verdict(ratio.meets(RATIO))}** ({ratio.text()}).",
    ]


def _added(run: Run) -> list[str]:
    added = run.added
    names = {
        "after_decision": "turn decided → first agent audio",
        "perceived": "caller stops speaking → first agent audio",
    }
    lines = [
        "### (a) Added latency per turn",
        "",
        f"One call at a time, bare and ours alternating in rounds of {ROUND_TURNS} turns.",
        "",
        "| Clock | Bare p50 / p95 | Ours p50 / p95 | Added p95 | Ratio p95 |",
        "|---|---|---|---|---|",
    ]
    for clock in ("after_decision", "perceived"):
        row = added[clock]
        lines.append(
            f"| {names[clock]} | {row['bare']['p50']:.1f} / {row['bare']['p95']:.1f} ms "
            f"| {row['ours']['p50']:.1f} / {row['ours']['p95']:.1f} ms "
            f"| {row['added_p95']:+.1f} ms | {row['ratio_p95']:.3f} |"
        )
    fallback = added["fallback_turns"]
    return lines + [
        "",
        f"{added['turns']} turns each. The caller-perceived clock adds the VAD's 0.2 s stop time "
        "and the end-of-turn model, identical in both pipelines, and counts only turns the model "
        "closed itself: on this synthetic sentence smart-turn v3 sometimes judges the finished "
        "sentence unfinished and the turn ends on the 1.5 s silence fallback instead (bare "
        f"{fallback['bare']}, ours {fallback['ours']} of {added['turns']} turns), a property of "
        "the model that neither pipeline changes. Its p95 is each pipeline's \"one call\" below.",
    ]


def _per_process(run: Run) -> list[str]:
    bare, ours = run.per_process["bare"], run.per_process["ours"]
    by_calls = {name: {row.calls: row for row in rows} for name, rows in run.per_process.items()}
    levels = sorted(set(by_calls["bare"]) | set(by_calls["ours"]))
    lines = [
        "### (b) Concurrent calls per process: bare and ours side by side",
        "",
        f"Each call speaks {LEVEL_TURNS} turns at real-time pace; starts are spread over one "
        "turn so calls are not in lockstep. Bare and ours alternate level by level in one "
        "process; a series stops after failing two levels in a row (—: not run). p50/p95 are "
        "caller-perceived over turns the model closed, with p95 as a multiple of one call's. "
        "CPU is the process's (and its analyzer's) per call per second of caller audio, "
        "1000 ms/s being one CPU per call. Load is the machine's 1-minute load average as "
        "the level ended (bare / ours).",
        "",
        "| Calls | Bare answered | Bare p50 / p95 | Bare decided → audio p95 | Bare CPU "
        "| Ours answered | Ours p50 / p95 | Ours decided → audio p95 | Ours CPU "
        "| Ours RSS / call | Load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for calls in levels:
        cells = []
        for name in ("bare", "ours"):
            row = by_calls[name].get(calls)
            cells += ["—"] * 4 if row is None else [
                f"{row.answered}/{row.expected}",
                f"{row.p50_ms:.0f} / {row.p95_ms:.0f} ms ({row.p95_vs_one_call:.2f}×)",
                f"{row.after_decision_p95_ms:.1f} ms", f"{row.cpu_ms_per_audio_s:.0f} ms/s",
            ]
        row = by_calls["ours"].get(calls)
        cells.append("—" if row is None else f"{row.rss_per_call_kib / 1024:.1f} MiB")
        cells.append(" / ".join(f"{by_calls[name][calls].load:.1f}" for name in ("bare", "ours")
                                if calls in by_calls[name]))
        lines.append(f"| {calls} | " + " | ".join(cells) + " |")
    ratio = capacity_ratio(sustained(ours), sustained(bare))
    return lines + [
        "",
        "Sustained (every turn answered, p95 under twice one call's; ≥: never failed, the "
        f"capacity is at least that): bare **{sustained(bare).text()}**, ours "
        f"**{sustained(ours).text()}** calls per process; ours ÷ bare **{ratio.text()}**, "
        f"target ≥ {RATIO}: **{verdict(ratio.meets(RATIO))}**.",
    ]


def _per_box(run: Run) -> list[str]:
    lines = [
        f"### (c) Calls per box: {run.processes} processes, one per CPU",
        "",
        f"The service runs one worker process per CPU, so a box's calls are measured split "
        f"across {run.processes} bench processes started together, each with its own event loop, "
        "turn models, prosody analyzer and calls; the parent merges what they measured. p95 is "
        "compared with one call alone on the box.",
    ]
    for voices, rows, one_call in ((FAKE, run.box, run.added["perceived"]["ours"]["p95"]),
                                   (LOCAL, run.local_box, run.local_one_call_p95_ms)):
        if not rows:
            continue
        found = sustained(rows)
        title = "Fake voices" if voices == FAKE else "Offline voices"
        lines += ["", f"**{title}** (one call alone: p95 {one_call:.0f} ms)."]
        if voices == LOCAL:
            lines += [
                "",
                "PocketSphinx STT and eSpeak NG TTS, what `make run` serves with no keys, the "
                f"instant fake LLM answering \"{LOCAL_REPLY}\"; p50/p95 include decoding the "
                "caller's last words and synthesizing the reply. `DecoderPool.shared()` starts one "
                "decoder process per CPU in each process that uses it, which with one process "
                f"per CPU would be {run.processes * run.processes} decoders on {run.processes} "
                f"CPUs; each box process gets {run.decoders_per_process} instead (one decoder "
                "per CPU of the box).",
            ]
        lines += ["", *_box_header(), *_box_rows(rows), "",
                  f"Sustained: **{found.text()}** calls per box, target ≥ {BOX_CALLS[voices]}: "
                  f"**{verdict(found.meets(BOX_CALLS[voices]))}**."]
    return lines


def _box_header() -> list[str]:
    return [
        "| Calls | p50 | p95 | p95 vs one call | Turn decided → audio p95 | Fallback turns "
        "| CPU | RSS / call | Answered | Load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]


def _box_rows(rows: list[LevelRow]) -> list[str]:
    return [
        f"| {row.calls} | {row.p50_ms:.0f} ms | {row.p95_ms:.0f} ms "
        f"| {row.p95_vs_one_call:.2f}× | {row.after_decision_p95_ms:.1f} ms "
        f"| {row.fallback_turns} | {row.cpu_ms_per_audio_s:.0f} ms/s "
        f"| {row.rss_per_call_kib / 1024:.1f} MiB "
        f"| {row.answered}/{row.expected} | {row.load:.1f} |"
        for row in rows
    ]


def _profiles(run: Run) -> list[str]:
    if not run.profiles:
        return []
    lines = [
        "### (d) Where the CPU goes",
        "",
        "CPU per call per second of caller audio, in passes of their own (the hooks cost CPU, "
        "so these passes' latencies are not used above): each processor's `process_frame` and "
        "background tasks, each observer, Pipecat's hand-off between processors and observer "
        "fan-out, Silero VAD's batched scoring, timed exclusively on the event loop's thread "
        "at every task step (`bench/cpu_profile.py`); work in thread pools timed in its thread; "
        "child processes read from the kernel; the rest of the loop's thread and of the "
        "process as remainders. Each hook costs about a microsecond of the thread's CPU (a "
        "system call to read the clock): that cost is measured before each pass against the "
        "same steps and calls without hooks, and taken out of the account it landed in. Share "
        "is of the pass's CPU without the hooks; 1000 ms/s is one CPU per call.",
    ]
    for voices, profiles in run.profiles.items():
        ours, bare = profiles["ours"], profiles["bare"]
        hooks = run.hooks_cpu.get(voices, {})
        title = "Fake voices" if voices == FAKE else "Offline voices"
        total_ours = sum(row.ms_per_audio_s for row in ours)
        total_bare = sum(row.ms_per_audio_s for row in bare)
        lines += [
            "",
            f"**{title}**, {run.profile_calls[voices]} calls at once in one process, "
            f"{LEVEL_TURNS} turns each. Total: ours **{total_ours:.1f}** ms/s "
            f"(one CPU's worth carries {1000 / total_ours:.0f} such calls), bare "
            f"**{total_bare:.1f}** ms/s ({1000 / total_bare:.0f}); the hooks' cost taken out: "
            f"ours {hooks.get('ours', 0.0):.1f}, bare {hooks.get('bare', 0.0):.1f} ms/s.",
            "",
            "| Where | Ours ms/s | Ours share | Bare ms/s | Bare share |",
            "|---|---|---|---|---|",
        ]
        for account, mine, theirs in side_by_side(ours, bare):
            lines.append(f"| {account} | {_cells(mine)} | {_cells(theirs)} |")
        if voices == FAKE and len(run.unhooked_cpu) == 2:
            lines += [
                "",
                f"The check: with no hook at all, the same {run.profile_calls[voices]} calls "
                f"used {run.unhooked_cpu['ours']:.1f} ms/s (ours) and "
                f"{run.unhooked_cpu['bare']:.1f} ms/s (bare) in (b).",
            ]
    return lines


def _cells(row: ProfileRow | None) -> str:
    return "— | —" if row is None else f"{row.ms_per_audio_s:.2f} | {row.share:.1%}"
