"""Outbound calling: the dispatcher's throughput, and what its load costs inbound calls.

(1) `bench/outbound_dispatch.py`: the real service (one process, then two sharing the
database) dials a burst of due tasks through the Twilio stand-in and follows each to its
outcome, pace and lines lifted; then one process with the defaults. (2)
`bench/outbound_inbound.py`: inbound turn latency in one process, quiet vs. with that
process's dispatcher working through a backlog at its default pace, and unpaced.

    python -m bench.outbound [--tasks 200] [--limited-tasks 20] [--inbound 10]
                             [--rounds 2] [--backlog 600]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loguru import logger

from bench.call_driver import CALLER_LINE
from bench.harness import trim_trailing_silence
from bench.outbound_dispatch import measure_dispatch
from bench.outbound_inbound import measure_inbound_cost
from bench.outbound_setup import FAST_CALLEES, Standin, new_clinic
from bench.report import measured_line, publish
from bench.twilio_standin import DEFAULT_NO_ANSWER_S, DEFAULT_RING_S
from config import Settings
from db.embedded import EmbeddedPostgres
from db.migrations import apply_migrations
from db.pool import Database
from lib import event_loop
from pipeline.providers import LOCAL_VOICES_CALL_CAPACITY
from services.espeak.engine import synthesize_pcm
from services.twilio import PHONE_SAMPLE_RATE

COMMAND = "python -m bench.outbound"
# Neither lines nor the dial pace limit the dispatcher in (1a): its own work is measured.
UNLIMITED = {"MAX_CONCURRENT_CALLS": "1000", "OUTBOUND_DIALS_PER_SECOND": "1000"}


def load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[Callable[[str], None]]:
    """Standard output and error (the in-process service's log and access log) go to
    `path`; yields what prints a progress line where standard output went before."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    progress = os.fdopen(os.dup(saved[1]), "w")

    def say(line: str) -> None:
        print(line, file=progress, flush=True)

    with path.open("w") as log:
        for fd in saved:
            os.dup2(log.fileno(), fd)
        try:
            yield say
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            progress.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    workdir = Path(tempfile.mkdtemp(prefix="bench-out-", dir="/tmp"))
    server = EmbeddedPostgres(workdir / "pg")
    dsn = await server.start()
    report: dict[str, Any] = {"load_before": load_average(), "dispatch": []}
    try:
        database = await Database.connect(Settings(_env_file=None, data_dir=workdir,
                                                   database_url=dsn))
        await apply_migrations(database.pool)
        clinic = await new_clinic(database.pool)
        standin = Standin.start(clinic.number, workdir / "standin.log")
        try:
            print(f"(1a) dispatcher throughput, {args.tasks} tasks due at once")
            for processes in args.processes:
                report["dispatch"].append(await measure_dispatch(
                    database.pool, dsn, standin, clinic, workdir, processes=processes,
                    tasks=args.tasks, env=UNLIMITED))
            if args.limited_tasks:
                print(f"(1b) {args.limited_tasks} tasks due at once, the defaults")
                report["limited"] = await measure_dispatch(
                    database.pool, dsn, standin, clinic, workdir, processes=1,
                    tasks=args.limited_tasks)
            if args.rounds:
                print(f"(2) {args.inbound} inbound calls, quiet vs. {args.backlog} outbound "
                      "tasks due at once, paced and unpaced, in the same process")
                speech = trim_trailing_silence(
                    await synthesize_pcm(CALLER_LINE, PHONE_SAMPLE_RATE), PHONE_SAMPLE_RATE)
                with output_to(workdir / "in-process.log") as say:
                    report["inbound"] = await measure_inbound_cost(
                        dsn, standin, clinic, workdir, calls=args.inbound, rounds=args.rounds,
                        backlog=args.backlog, speech=speech, say=say)
                logger.remove()
                logger.add(sys.stderr, level="WARNING")
        finally:
            standin.stop()
            await database.close()
    except BaseException:
        print(f"the services' logs are kept in {workdir}")
        raise
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    finally:
        await server.stop()
    report["load_after"] = load_average()
    return report


def _ms(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.1f} / {stats['p95']:.1f} ms"


def _s(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.2f} / {stats['p95']:.2f} / {stats['max']:.2f} s"


def render(report: dict[str, Any]) -> str:
    lines = [
        "## Outbound calling: dispatcher throughput, and what it costs inbound calls",
        "",
        measured_line(COMMAND),
        (f"The machine's 1-minute load average (other work sharing its CPUs) was "
         f"{report['load_before']:.1f} before and {report['load_after']:.1f} after."),
        "",
        ("The real dispatcher (`runner/outbound/dispatcher.py`, the `outbound_dial` job of "
         "each process's job worker) against the simulator's Twilio stand-in "
         "(`simulator/twilio_rest.py`), which runs in its own process "
         "(`bench/twilio_standin.py`) as Twilio is not on the service's machine: it places each "
         "call, posts every status callback (initiated, ringing, answered, completed) signed, "
         "and asks a voicemail's TwiML. The callees answer without a media stream, in turn "
         f"{', '.join(FAST_CALLEES)} (a phone rings {DEFAULT_RING_S:g} s before a machine "
         f"answers, {DEFAULT_NO_ANSWER_S:g} s before nobody does), so the dispatcher's whole "
         "path is measured (dial, callbacks, the voicemail message and its call record, the "
         "outcome and the next try an hour later) and no conversation. Each task has its own "
         "number; the tasks are callbacks due at one moment in a timezone where it is the "
         "afternoon, all written (with their dial jobs) before that moment, on an embedded "
         "PostgreSQL the processes share."),
        "",
    ]
    lines += _dispatch_section(report)
    if "inbound" in report:
        lines += _inbound_section(report["inbound"])
    return "\n".join(lines)


def _every_outcome(run: dict[str, Any]) -> str:
    if run["due_to_all_outcomes_s"] is None:
        return f"{run['unsettled']} left to the follow-up"
    return f"{run['due_to_all_outcomes_s']:.1f} s"


def _dispatch_section(report: dict[str, Any]) -> list[str]:
    lines = [
        "### (1) Dispatcher throughput",
        "",
        ("`python main.py serve` processes (no keys: offline voices) with `PUBLIC_URL` and the "
         "stand-in's account, `LOG_LEVEL=INFO`. *Dials/s*: create requests the stand-in "
         "received, over the time from the first to the last. *Due → dial*: from the moment "
         "the tasks fell due to the stand-in receiving each create request (p50 / p95 / max). "
         "*Written → dial*: from the attempt committed `dialing` to that request (the Twilio "
         "client's worker threads). *Every outcome*: from the moment they fell due until the "
         "last attempt had its outcome in the database (or how many were still waiting "
         "for the follow-up 20 s after the last dial). *Outcomes/s*: the outcomes known "
         "over the time from the due moment to the last of them. *Most open*: the most calls placed and "
         "not yet ended at once, as the stand-in saw them (a voicemail's call stays open while "
         "its message plays; the service frees the line it held at the answer). *Callbacks "
         "refused*: status callbacks the service did not take (a 503 when it could not write "
         "within its 1.5 s database budget; the "
         "dispatcher then learns the outcome from Twilio on its next follow-up, "
         "`OUTBOUND_FOLLOW_UP_S` = 120 s). *Dialled twice*: numbers with more than one create "
         "request (each task is dialled once)."),
        "",
        ("| Run | Processes | Tasks | Dials/s | Due → dial p50 / p95 / max | Written → dial "
         "p50 / p95 | Every outcome | Outcomes/s | Most open | Callbacks refused "
         "| Dialled twice | Dials per process |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = [("(1a) pace and lines lifted", run) for run in report["dispatch"]]
    if "limited" in report:
        runs.append(("(1b) defaults", report["limited"]))
    for name, run in runs:
        written = run["written_to_placed"]
        lines.append(
            f"| {name} | {run['processes']} | {run['tasks']} | {run['dials_per_s']:.1f} "
            f"| {_s(run['due_to_dial'])} | {written['p50']:.2f} / {written['p95']:.2f} s "
            f"| {_every_outcome(run)} | {run['outcomes_per_s']:.1f} "
            f"| {run['most_open']} | {run['callbacks_refused']} of {run['callbacks']} "
            f"| {run['dialled_twice']} | {' + '.join(str(n) for n in run['by_process'])} |")
    lines += ["", *_scaling(report["dispatch"])]
    if "limited" in report:
        limited = report["limited"]
        waves = [n for n in limited["waves"] if n]
        lines += [
            "",
            ("(1b) runs with the defaults: one process places at most "
             "`OUTBOUND_DIALS_PER_SECOND` (1) calls a second, offline voices give it "
             f"{LOCAL_VOICES_CALL_CAPACITY} lines, outbound calls leave "
             "`OUTBOUND_INBOUND_RESERVE` (2) of them to callers, every call dialled holds a "
             "line until it is answered or ends, and a task that finds no free line looks "
             "again after `OUTBOUND_CAPACITY_RECHECK_S` (45 s). The "
             f"{limited['tasks']} tasks went out at {limited['dials_per_s']:.1f} a second, the "
             f"last {limited['due_to_dial']['max']:.0f} s after they fell due, with at most "
             f"{limited['most_open']} calls open at once"
             + ("; no task found the lines full." if len(waves) <= 1 else
                f"; the lines filled, so they went in waves 45 s apart "
                f"({' then '.join(str(n) for n in waves)}).")
             + f" Every outcome: {_every_outcome(limited)}."),
        ]
    return lines + [""]


def _scaling(runs: list[dict[str, Any]]) -> list[str]:
    text = ("(1a) sets `MAX_CONCURRENT_CALLS=1000` and `OUTBOUND_DIALS_PER_SECOND=1000` so "
            "the dispatcher's own work is what is measured. Each process runs at most 10 jobs at once "
            "(`runner/job_worker.MAX_RUNNING`), so a burst is dialled ten steps at a time per "
            "process and the webhooks keep their share of its 10 database connections.")
    by_processes = {run["processes"]: run for run in runs}
    if 1 in by_processes and 2 in by_processes:
        one, two = by_processes[1], by_processes[2]
        text += (f" Two processes dialled {two['dials_per_s']:.1f} a second against one's "
                 f"{one['dials_per_s']:.1f}, on a machine whose CPUs they share with each "
                 "other, the database and the stand-in; the queue handed each task to one "
                 f"of them ({' + '.join(str(n) for n in two['by_process'])} dials) and "
                 f"{'no number was' if not two['dialled_twice'] else 'SOME NUMBERS WERE'} "
                 "dialled twice.")
    return [text]


def _condition_row(name: str, row: dict[str, Any], turns_expected: int, *,
                   outbound: bool) -> str:
    lag = row["loop_lag"]
    cells = [name, _ms(row["after_decision"]), _ms(row["perceived"]),
             f"{lag['p50']:.1f} / {lag['p95']:.1f} / {lag['max']:.0f} ms",
             f"{row['cpu_share']:.2f}"]
    if outbound:
        cells += [f"{row['dials_per_s']:.1f} ({row['dials']} in {row['window_s']:.0f} s)",
                  f"{row['busy_share']:.0%}", str(row["most_open"]),
                  f"{row['callbacks_refused']} of {row['callbacks']}"]
    else:
        cells += ["0", "-", "-", "-"]
    cells.append(f"{row['turns']}/{turns_expected}")
    return f"| {' | '.join(cells)} |"


def _inbound_section(inbound: dict[str, Any]) -> list[str]:
    quiet = inbound["quiet"]
    turns_expected = inbound["calls"] * 3 * inbound["rounds"]
    lines = [
        "### (2) Inbound turn latency under outbound load, in one process",
        "",
        ("The service runs in the benchmark's process (`api/app.create_app` under uvicorn: "
         "the runtime, its job worker with every job kind, the webhooks, INFO logging to a "
         f"file) with `MAX_CONCURRENT_CALLS={inbound['capacity']}`, and so do "
         f"{inbound['calls']} inbound calls: `bench.pipeline_latency`'s (our pipeline, eSpeak "
         "caller audio at real-time pace through the in-memory phone line, instant fake "
         "STT/LLM/TTS, the real Silero VAD and smart-turn v3), each holding one of the "
         "runtime's lines while it runs. Each call speaks 3 turns, the starts spread over one "
         f"turn. {inbound['rounds']} rounds, each running the calls three times: *quiet* (no "
         f"outbound task due); *paced* ({inbound['backlog']} tasks fall due as the calls "
         "start and the dispatcher dials them at its default pace, "
         f"`OUTBOUND_DIALS_PER_SECOND` = {inbound['pace']:g}: each task's job runs, is given "
         "its turn and runs again then); *unpaced* (the same backlog with the pace lifted: "
         "the dispatcher dials, within the lines the calls leave it less the reserve, and "
         "takes the status callbacks at the rate it can). After an outbound round the tasks not dialled yet "
         "are cancelled and the process settles. *Event-loop lag*: how late a 50 ms sleep "
         "wakes, sampled throughout. *CPU*: the process's CPU time over the round's wall time "
         "(1.0 = one core). *Dialling*: the share of the round's seconds in which a call was "
         "dialled."),
        "",
        ("| Condition | Turn decided → first audio p50 / p95 | Caller stops → first audio "
         "p50 / p95 | Event-loop lag p50 / p95 / max | CPU | Outbound dials/s | Dialling "
         "| Most open | Callbacks refused | Turns answered |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = {"quiet": "quiet", "paced": f"paced ({inbound['pace']:g}/s)",
             "unpaced": "unpaced"}
    lines += [_condition_row(name, inbound[key], turns_expected, outbound=key != "quiet")
              for key, name in names.items()]
    lines.append("")
    for key in ("paced", "unpaced"):
        row = inbound[key]
        after = row["after_decision"]["p95"] - quiet["after_decision"]["p95"]
        after50 = row["after_decision"]["p50"] - quiet["after_decision"]["p50"]
        perceived = row["perceived"]["p95"] - quiet["perceived"]["p95"]
        lines.append(
            f"- **{names[key]}**: {after:+.1f} ms at p95 after the turn decision "
            f"({after50:+.1f} ms at p50), {perceived:+.1f} ms at p95 to what the caller "
            f"perceives, at {row['dials_per_s']:.1f} dials a second; "
            + (f"{row['left_undialled']} of the {row['tasks']} tasks due by the end of its "
               "rounds were still waiting for the dispatcher then."
               if row["left_undialled"] else
               f"every one of the {row['tasks']} tasks due by the end of its rounds had been "
               "dialled by then.")
            + (f" At {inbound['pace']:g} a second one process takes "
               f"{inbound['backlog'] / inbound['pace'] / 60:.0f} minutes to dial a backlog of "
               f"{inbound['backlog']}: that wait is what keeps the callers' turns as fast as "
               "in the quiet rounds." if key == "paced" else ""))
    lines += [
        "",
        ("With 60 turns or so per condition, a p95 rests on its three slowest turns and "
         "moves by tens of milliseconds from run to run on a shared machine; the p50 "
         "difference is the steadier one. Twilio itself places an account's calls at its "
         "calls-per-second limit (1 by default) and queues the rest, so dialling faster "
         "than that gains little and costs the callers what the unpaced rounds show."),
        "",
        ("The caller-perceived clock counts only turns the end-of-turn model closed "
         f"(fallback turns: quiet {quiet['fallback_turns']}, paced "
         f"{inbound['paced']['fallback_turns']}, unpaced "
         f"{inbound['unpaced']['fallback_turns']}). "
         "Not measured here: outbound calls answered by a person. Such a call runs the same "
         "pipeline as an inbound call and takes a line like one, so it costs what one more "
         "inbound call costs (the concurrent-calls table of the pipeline latency section)."),
    ]
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="(1a) tasks due at once")
    parser.add_argument("--processes", default="1,2",
                        help="(1a) service processes sharing the database, one run each")
    parser.add_argument("--limited-tasks", type=int, default=20,
                        help="(1b) tasks due at once under the default line limit (0: skip)")
    parser.add_argument("--inbound", type=int, default=10, help="(2) inbound calls")
    parser.add_argument("--rounds", type=int, default=2,
                        help="(2) rounds of each condition (0: skip)")
    parser.add_argument("--backlog", type=int, default=600,
                        help="(2) outbound tasks due at the start of each loaded round")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args()
    args.processes = [int(n) for n in args.processes.split(",") if n.strip()]
    return args


if __name__ == "__main__":
    arguments = parse_args()
    result = event_loop.run(main(arguments))
    publish("outbound", render(result), docs=not arguments.no_docs)
