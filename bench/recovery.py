"""Recovery from faults, against the real service: how long callers and operators wait.

Runs the chaos tests' own scenarios (`tests/chaos/scenarios.py`) on `python main.py
serve` with its embedded PostgreSQL, one fresh data directory each, and times them:

1. freeze: the database frozen (SIGSTOP) for 30 s as a caller says "yes" to a booking;
   `/voice/answer`, `/voice/status`, `/health` and `GET /api/calls` probed together every
   second meanwhile; then the time to healthy after the thaw.
2. kill-db: the embedded postmaster killed (SIGKILL) at the same moment; the time until
   `/health` is ok again (the process is never restarted) and the records lost.
3. sigterm: SIGTERM while a voice caller listens after the greeting; the time until the
   caller hears the shutdown line, the time to the process's exit, the call's reason.
4. sigkill: SIGKILL of the service 3 s into a voice call (and with a call answered but
   never streamed), then a start on the same data directory: start to healthy, the
   orphaned calls closed and with what reason, the recording salvaged.

    python -m bench.recovery [--freeze-s 30] [--probe-every-s 1] [--only freeze kill-db ...]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
from loguru import logger

from bench.report import bench_parser, measured_line, publish
from config import Settings
from db import repositories as repo
from db.embedded import EmbeddedPostgres
from lib import event_loop
from lib.prompts import render_prompt
from runner.drain import SHUTDOWN_LINE
from tests.chaos.database_faults import (
    HEALTHY_BOUND_S,
    REPLY_BOUND_S,
    REQUEST_BOUND_S,
    EmbeddedService,
    embedded_service,
)
from tests.chaos.scenarios import (
    EXIT_MARGIN_S,
    LINE_DROP_BOUND_S,
    SILENCE_BOUND_S,
    freeze_database_mid_call,
    kill_database_mid_call,
    kill_service_mid_call,
    postgres_pid,
    sigterm_mid_call,
    stop_postgres,
)
from tests.chaos.service_calls import PATIENT_CALLER

PATHS = ("/voice/answer", "/voice/status", "/health", "/api/calls")
API_READ = "/api/calls"
DRAIN_S = Settings(_env_file=None).server.shutdown_drain_s  # the drain bound the service gets
# The demo greeting plays ~6.4 s; a signal this long after it began finds the agent quiet,
# waiting for a caller who listens (PATIENT_CALLER says nothing for 30 s).
AFTER_GREETING_S = 9.0


async def measure_freeze(freeze_s: float, probe_every_s: float) -> dict[str, Any]:
    with embedded_service() as service:
        outcome = await freeze_database_mid_call(service, freeze_s, probe_every_s)
        lost = outcome.lost() + [str(p) for p in service.spooled_files()]
        still_running = service.process.process.poll() is None
    paths = {}
    for path in PATHS:
        probes = [p for p in outcome.probes if p.path == path]
        seconds = [p.seconds for p in probes]
        paths[path] = {"count": len(probes), "max": max(seconds),
                       "median": statistics.median(seconds),
                       "statuses": dict(Counter(p.status for p in probes)),
                       "trouble_twiml": sum("technical problem" in p.body for p in probes)}
    reply_s, _ = outcome.yes_answered()
    return {"frozen_s": outcome.frozen_s, "paths": paths, "reply_s": reply_s,
            "healthy_after_thaw_s": outcome.healthy_after_thaw_s, "lost": lost,
            "restarts": outcome.health["database"]["restarts"],
            "still_running": still_running}


async def measure_database_kill() -> dict[str, Any]:
    # One write retry: what cannot be written while the server is down goes to the spool,
    # which the supervisor must replay once it is back.
    with embedded_service({"DB_WRITE_RETRIES": "1"}) as service:
        outcome = await kill_database_mid_call(service)
        lost = outcome.lost() + [str(p) for p in service.spooled_files()]
        same_process = service.process.process.poll() is None
    reply_s, _ = outcome.yes_answered()
    return {"healthy_s": outcome.healthy_after_kill_s, "lost": lost,
            "same_process": same_process,
            "restarts": outcome.health["database"]["restarts"],
            "replayed": outcome.health["database"]["replayed"],
            "worst_probe_s": max(p.seconds for p in outcome.probes), "reply_s": reply_s}


async def measure_sigterm() -> dict[str, Any]:
    with embedded_service() as service:
        outcome = await sigterm_mid_call(
            service.process, service.api_key, service.twilio_token,
            DRAIN_S + EXIT_MARGIN_S + 10, script=PATIENT_CALLER,
            signal_after_s=AFTER_GREETING_S)
        record = await record_after_exit(service, outcome.call.call_id or "")
        drained = [line for line in service.process.log().splitlines() if "drained:" in line]
    signal_at = outcome.call.at_s(outcome.signalled)
    after = outcome.speech_after_signal()
    agent = [t["text"] for t in record["turns"] if t["speaker_role"] == "agent"]
    # The agent quiet for a second before the signal: the next speech is the shutdown line.
    recent = [s for s in outcome.heard.agent_speech if s.end_s > signal_at - 1.0]
    return {
        "quiet_at_signal": len(recent) == 1 and agent[-1:] == [render_prompt(SHUTDOWN_LINE)],
        "line_heard_s": outcome.new_speech_after_signal_s(),
        "line_ended_s": after[-1].end_s - signal_at if after else None,
        "dropped_after_line_s": outcome.line_dropped_after_last_word_s() if after else None,
        "exited_s": outcome.exited_after_s, "exit_code": outcome.exit_code,
        "reason": record["completion_reason"], "agent_turns": agent,
        "events": [e["type"] for e in record["events"]],
        "health": outcome.health.status_code, "busy_turned_away": "<Say>" in outcome.busy.text,
        "drained": drained[-1].split("drained: ", 1)[1] if drained else "(not logged)",
    }


async def record_after_exit(service: EmbeddedService, call_id: str) -> dict[str, Any]:
    """The call's record from the service's embedded database once the service has gone
    (it stopped its server on the way out)."""
    server = EmbeddedPostgres(service.pg_dir)
    pool = await asyncpg.create_pool(await server.start(), min_size=1, max_size=1)
    try:
        call = await repo.get_call(pool, call_id)
        return await repo.get_call_detail(pool, call_id, str(call["workspace_id"])) or {}
    finally:
        await pool.close()
        await server.stop()


async def measure_sigkill() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-kill-", dir="/tmp") as directory:
        data_dir = Path(directory)
        try:
            outcome = await kill_service_mid_call(data_dir)
            outcome.restarted.process.wait(30)
            database_outlived_stop = postgres_pid(data_dir / "pg") is not None
        finally:
            stop_postgres(data_dir / "pg")
    live = outcome.details[outcome.call.call_id or ""]
    events = {e["type"]: e["data"] for e in live["events"]}
    orphans = {call_id: {"reason": detail["completion_reason"],
                         "was": {e["type"]: e["data"] for e in detail["events"]}
                         .get("call_ended", {}).get("status_was")}
               for call_id, detail in outcome.details.items()}
    return {"restart_s": outcome.restart_s, "orphans_closed": outcome.orphans_closed,
            "orphans_closed_in_s": outcome.orphans_closed_in_s, "orphans": orphans,
            "salvaged": events.get("recording_salvaged"),
            "recording_served": outcome.stereo.status_code == 200,
            "line_dropped_s": outcome.line_dropped_s,
            "database_outlived_stop": database_outlived_stop}


SCENARIOS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "freeze": measure_freeze, "kill-db": measure_database_kill,
    "sigterm": measure_sigterm, "sigkill": measure_sigkill,
}


async def main(only: list[str], freeze_s: float, probe_every_s: float) -> dict[str, Any]:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    os.environ.pop("DATABASE_URL", None)  # every scenario runs on the embedded database
    results: dict[str, Any] = {"load_before": os.getloadavg()[0], "freeze_target_s": freeze_s}
    started = time.monotonic()
    for name in only:
        print(f"{name}...", flush=True)
        began = time.monotonic()
        if name == "freeze":
            results[name] = await measure_freeze(freeze_s, probe_every_s)
        else:
            results[name] = await SCENARIOS[name]()
        results[name]["wall_s"] = time.monotonic() - began
    results["wall_s"] = time.monotonic() - started
    results["load_after"] = os.getloadavg()[0]
    return results


def verdict(met: bool) -> str:
    return "**met**" if met else "**missed**"


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


def row(fault: str, measure: str, result: str, target: str) -> str:
    return f"| {fault} | {measure} | {result} | {target} |"


def render(results: dict[str, Any], command: str) -> str:
    load = (f" The machine's 1-minute load average was {results['load_before']:.1f} before "
            f"and {results['load_after']:.1f} after (other jobs shared it); the bench took "
            f"{results['wall_s']:.0f} s.")
    lines = ["## Recovery from database, process and shutdown faults", "",
             measured_line(command) + load, "",
             "| Fault | Measure | Result | Target |", "|---|---|---|---|"]
    lines += _freeze_rows(results.get("freeze"))
    lines += _database_kill_rows(results.get("kill-db"))
    lines += _sigterm_rows(results.get("sigterm"))
    lines += _sigkill_rows(results.get("sigkill"))
    lines += ["", HOW_MEASURED]
    return "\n".join(lines)


def _freeze_rows(freeze: dict[str, Any] | None) -> list[str]:
    if freeze is None:
        return []
    name = f"database frozen {freeze['frozen_s']:.0f} s"
    rows = []
    for path, stats in freeze["paths"].items():
        statuses = ", ".join(f"{count}× {status}" for status, count
                             in sorted(stats["statuses"].items()))
        if path == "/voice/answer":
            statuses += f", {stats['trouble_twiml']} the \"technical problem\" TwiML"
        label = f"`{path}`" + (" (API read)" if path == API_READ else "")
        rows.append(row(name, f"{label}: slowest / median of {stats['count']} ({statuses})",
                        f"{stats['max']:.2f} / {stats['median']:.2f} s",
                        f"< {REQUEST_BOUND_S:g} s: {verdict(stats['max'] < REQUEST_BOUND_S)}"))
    thawed = freeze["healthy_after_thaw_s"]
    healthy = thawed is not None and freeze["still_running"] and freeze["restarts"] == 0
    rows += [
        row(name, 'the caller\'s "yes" (said as it froze) → the agent\'s answer',
            f"{freeze['reply_s']:.2f} s",
            f"< {REPLY_BOUND_S:g} s: {verdict(freeze['reply_s'] < REPLY_BOUND_S)}"),
        row(name, "thaw → `/health` ok", seconds(thawed),
            f"ok again, no restart: {verdict(healthy)}"),
        row(name, "records lost (the call's record, the spool)", str(len(freeze["lost"])),
            f"0: {verdict(not freeze['lost'])}"),
    ]
    return rows


def _database_kill_rows(kill: dict[str, Any] | None) -> list[str]:
    if kill is None:
        return []
    name = "embedded database killed"
    healthy = kill["healthy_s"]
    met = healthy is not None and healthy < HEALTHY_BOUND_S and kill["same_process"]
    return [
        row(name, f"kill → `/health` ok (the supervisor restarted the server "
                  f"{kill['restarts']}×, same service process)", seconds(healthy),
            f"< {HEALTHY_BOUND_S:g} s, no process restart: {verdict(met)}"),
        row(name, "slowest request path while down", f"{kill['worst_probe_s']:.2f} s",
            f"< {REQUEST_BOUND_S:g} s: {verdict(kill['worst_probe_s'] < REQUEST_BOUND_S)}"),
        row(name, 'the caller\'s "yes" (said as it died) → the agent\'s answer',
            f"{kill['reply_s']:.2f} s",
            f"< {REPLY_BOUND_S:g} s: {verdict(kill['reply_s'] < REPLY_BOUND_S)}"),
        row(name, f"records lost ({kill['replayed']} spooled meanwhile and replayed)",
            str(len(kill["lost"])), f"0: {verdict(not kill['lost'])}"),
    ]


def _sigterm_rows(term: dict[str, Any] | None) -> list[str]:
    if term is None:
        return []
    name = "SIGTERM, a caller listening"
    heard = term["line_heard_s"]
    bound = DRAIN_S + EXIT_MARGIN_S
    quiet = "" if term["quiet_at_signal"] else " (the agent was still speaking at the signal)"
    return [
        row(name, f"signal → the caller hears the shutdown line{quiet}", seconds(heard),
            f"< {SILENCE_BOUND_S:g} s: {verdict(heard is not None and heard < SILENCE_BOUND_S)}"),
        row(name, "signal → the line's last word; its last word → the stream closed",
            f"{seconds(term['line_ended_s'])}; {seconds(term['dropped_after_line_s'])}", "—"),
        row(name, f"signal → process exit (drain: {term['drained']})",
            f"{term['exited_s']:.2f} s",
            f"< {bound:g} s (drain {DRAIN_S:g} s + {EXIT_MARGIN_S:g} s): "
            f"{verdict(term['exited_s'] < bound)}"),
        row(name, "the call's completion reason", f"`{term['reason']}`",
            f"`server_shutdown`: {verdict(term['reason'] == 'server_shutdown')}"),
    ]


def _sigkill_rows(kill: dict[str, Any] | None) -> list[str]:
    if kill is None:
        return []
    name = "service SIGKILL, then a start"
    orphans = kill["orphans"]
    reasons = Counter(f"`{o['reason']}` (was {o['was']})" for o in orphans.values())
    crash = all(o["reason"] == "server_crash" for o in orphans.values())
    salvaged = kill["salvaged"] or {}
    served = "served" if kill["recording_served"] else "not served"
    repaired = "header repaired" if salvaged.get("header_repaired") else "header intact"
    salvage = (f"{salvaged.get('seconds')} s of audio, {repaired}, {served}" if salvaged
               else "none")
    return [
        row(name, "kill → the caller's stream closed", f"{kill['line_dropped_s']:.2f} s",
            f"< {LINE_DROP_BOUND_S:g} s: {verdict(kill['line_dropped_s'] < LINE_DROP_BOUND_S)}"),
        row(name, "start → healthy (its embedded database, the orphans closed first)",
            f"{kill['restart_s']:.2f} s", "—"),
        row(name, f"orphaned calls closed (in {seconds(kill['orphans_closed_in_s'])} of the "
                  "start), with their reason",
            f"{kill['orphans_closed']} of {len(orphans)}: "
            + ", ".join(f"{count}× {reason}" for reason, count in reasons.items()),
            f"all, `server_crash`: {verdict(crash and kill['orphans_closed'] == len(orphans))}"),
        row(name, "the live call's recording salvaged", salvage,
            f"kept and served: {verdict(bool(salvaged) and kill['recording_served'])}"),
        row(name, "a clean stop of the restarted service stops its embedded PostgreSQL",
            "no, it outlived the stop" if kill["database_outlived_stop"] else "yes",
            f"yes: {verdict(not kill['database_outlived_stop'])}"),
    ]


HOW_MEASURED = (
    "How measured (`bench/recovery.py`, on the chaos tests' own scenarios in "
    "`tests/chaos/scenarios.py`): each fault gets `python main.py serve` on a fresh data "
    "directory with its embedded PostgreSQL, local voices and no keys, and a simulated "
    "caller. *Database frozen*: the demo patient's typed booking call; as they say \"yes\" "
    "every PostgreSQL process is stopped (SIGSTOP); a new call's signed answer webhook, a "
    "signed status report, `/health` and an API read with a key go out together, again a "
    "second after each round, until the freeze time has passed; then SIGCONT and `/health` "
    "polled every 0.2 s until its database state is ok. *Database killed*: the same call, "
    "the postmaster killed (SIGKILL) at the \"yes\" with one write retry (so records are "
    "spooled); lost = caller or agent lines missing from the closed record, plus spool "
    "files never replayed. *SIGTERM*: a voice call (μ-law over the media stream, paced in "
    "real time); the signal 9 s after the greeting began, while the agent waits and the "
    "caller listens; the line is heard when its first voiced audio reaches the caller, its "
    "last word and the stream's close are on the caller's playback clock; the record is "
    "read from the embedded database after the exit. *SIGKILL*: a voice call 3 s past its greeting and one "
    "answered but never streamed; the service killed, then started on the same data "
    "directory (`start_service` timing the start to the first healthy `/health`); the "
    "records read through the API of the restarted service."
)


def parse_args():
    parser = bench_parser(__doc__)
    parser.add_argument("--freeze-s", type=float, default=30.0)
    parser.add_argument("--probe-every-s", type=float, default=1.0)
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), default=list(SCENARIOS))
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.only, args.freeze_s, args.probe_every_s))
    command = "python -m bench.recovery" + (
        f" --freeze-s {args.freeze_s:g}" if args.freeze_s != 30.0 else "")
    publish("recovery", render(result, command),
            docs=not args.no_docs and args.only == list(SCENARIOS))
