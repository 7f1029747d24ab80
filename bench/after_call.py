"""After the call: what the post-call work costs per call, and whether its quality score
finds the calls that went wrong.

Every persona in scenarios/personas/ calls the real service over the text path with no
keys (bench.personas: the deterministic engine, the rule-based caller, the demo clinic in
a fresh embedded PostgreSQL). Each call's after-call job (the rules analyst: summary,
five scores, memories) runs in the service's job worker while the next call goes on.
Read from the database afterwards:

- the analysis's own time (`call_analyses.duration_ms`) and the time from the call's end
  to its analysis being stored (queue pick-up included);
- the quality score beside the persona judge's verdict: do the failed calls score lower,
  and are they among the lowest-scoring calls a reviewer would open first?

    python -m bench.after_call [--only NAME ...] [--no-docs]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import statistics
from typing import Any

from bench import personas as persona_bench
from bench.report import bench_parser, measured_line, percentile, publish
from db.call_analyses import DIMENSIONS
from db.pool import Database
from lib import event_loop
from simulator.personas.model import load_personas
from simulator.personas.run import PersonaRun


class Analyses:
    """Each call's analysis, read right after the call: the clinic's reset between calls
    erases the patients it registered, and their calls' analyses with them."""

    def __init__(self) -> None:
        self.by_call: dict[str, dict[str, Any]] = {}

    async def collect(self, db: Database) -> None:
        rows = await db.pool.fetch(
            """SELECT a.call_id, a.analyst, a.quality_score, a.quality, a.duration_ms,
                      extract(epoch FROM a.analysed_at - c.ended_at) * 1000 AS after_end_ms,
                      (SELECT count(*) FROM memories m WHERE m.source_call = c.id) AS memories
               FROM call_analyses a JOIN calls c ON c.id = a.call_id""")
        for row in rows:
            self.by_call.setdefault(str(row["call_id"]), dict(row))

    async def per_run(self, db: Database, runs: list[PersonaRun]) -> list[dict[str, Any]]:
        """Each persona call's analysis with its timings (none for a call that never ran)."""
        await self.collect(db)
        return [{"persona": run.persona.name, "success": run.verdict.success,
                 **self.by_call.get(run.result.call_id, {"quality_score": None})}
                for run in runs if run.result is not None]


def score_line(good: list[float], bad: list[float], lowest: list[dict], caught: int) -> str:
    said = [f"successful calls score {statistics.fmean(good):.2f} on average" if good
            else "no call succeeded"]
    if bad:
        said.append(f"failed calls {statistics.fmean(bad):.2f}; the {len(lowest)} "
                    f"lowest-scoring calls hold **{caught} of the {len(bad)} failures**")
    else:
        said.append("no call failed")
    return "Quality score: " + ", ".join(said)


def render(report: dict) -> str:
    rows: list[dict[str, Any]] = report["inspected"]
    analysed = [r for r in rows if r["quality_score"] is not None]
    own = [float(r["duration_ms"]) for r in analysed]
    after_end = [float(r["after_end_ms"]) for r in analysed if r["after_end_ms"] is not None]
    good = [r["quality_score"] for r in analysed if r["success"]]
    bad = [r["quality_score"] for r in analysed if not r["success"]]
    ranked = sorted(analysed, key=lambda r: r["quality_score"])
    lowest = ranked[: max(len(bad), 1)]
    caught = sum(1 for r in lowest if not r["success"])
    mean = {name: statistics.fmean(r["quality"][name]["score"] for r in analysed)
            for name in DIMENSIONS} if analysed else {}
    lines = [
        "## After the call: post-call work per call, and what the quality score finds",
        "",
        measured_line("python -m bench.after_call"),
        "",
        f"{len(rows)} persona calls (scenarios/personas/) through the real service over the "
        "text path, no keys: each call's `call_analysis` job ran in the service's job worker "
        "(the rules analyst: summary, five scores, memories) while the next call went on. "
        f"{report['took_s']:.0f} s in all.",
        "",
        f"- **Analysed: {len(analysed)}/{len(rows)} calls**",
        f"- The analysis itself (load the record, summarise, score, store): p50 "
        f"{percentile(own, 50):.0f} ms, p95 {percentile(own, 95):.0f} ms, max "
        f"{max(own, default=0):.0f} ms",
        f"- The call's end → its analysis stored (queue pick-up included): p50 "
        f"{percentile(after_end, 50):.0f} ms, p95 {percentile(after_end, 95):.0f} ms",
        "- " + score_line(good, bad, lowest, caught),
        "- Mean per dimension: " + ", ".join(f"{name.replace('_', ' ')} {value:.2f}"
                                             for name, value in mean.items()),
        "",
        "| Persona | Judged | Quality | Lowest dimension | Why | Analysis ms | End → stored ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in ranked:
        worst = min(DIMENSIONS, key=lambda name: row["quality"][name]["score"])
        lines.append(
            f"| {row['persona']} | {'success' if row['success'] else '**failed**'} | "
            f"{row['quality_score']:.1f} | {worst.replace('_', ' ')} "
            f"({row['quality'][worst]['score']}) | {why(row['quality'][worst]['reason'])} | "
            f"{row['duration_ms']} | "
            f"{row['after_end_ms']:.0f} |")
    return "\n".join(lines)


def why(reason: str, limit: int = 90) -> str:
    reason = reason.replace("|", "/")
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def parse_args():
    parser = bench_parser(__doc__)
    parser.add_argument("--only", nargs="*", default=None, help="run only these personas")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    chosen = load_personas(persona_bench.PERSONAS)
    if args.only:
        chosen = [p for p in chosen if p.name in set(args.only)]
    analyses = Analyses()
    result = event_loop.run(persona_bench.main(chosen, inspect=analyses.per_run,
                                               after_each=analyses.collect))
    publish("after-call", render(result), docs=not args.no_docs)

