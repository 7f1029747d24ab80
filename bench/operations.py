"""What the rest of the operations surface costs, through the real code paths.

1. Recordings: a 1-minute and a 10-minute 8 kHz stereo WAV (tones and noise on both
   sides, taking turns): one channel split out (the first time, the cache removed before
   each run; then the cached file), the 800-point waveform, a 64 KiB byte range; and the
   same through the real app in-process (`GET …/recording/stereo` with a `Range`
   header, `GET …/recording/waveform`).
2. State guide: 10 000 calls (a random walk through the bundled graph each: several
   transitions and tool calls) in the embedded DB; `GET /api/insights/state-guide` for
   the last 200 and 5 000 calls, its three grouped queries alone, the merge alone.
3. Control plane through the app: GET / PATCH voice settings, POST a safety concept
   with 12 examples (embedded by the offline WordLlama embedder), GET escalations.
4. Local transcript verification (PocketSphinx) of an eSpeak-synthesised dialogue.
5. Log masking: µs per typical line, per line full of PHI, per nested extra.

    python -m bench.operations [--calls 10000] [--requests 300] [--no-docs]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import asyncio
import copy
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from loguru import logger

from api.app import create_app
from bench.calls_api import add_calls
from bench.report import bench_parser, measured_line, percentile, publish
from call.recording import interleave, write_wav
from config import Settings
from db import recording_files as rec
from db import repositories as repo
from db.insights import call_aggregates
from db.migrations import apply_migrations
from db.pool import Database
from flows.graph import RETURN, ContextGraph, bundled_graph
from flows.state_guide import state_guide
from lib import event_loop
from lib.log_privacy import mask_record
from runner import transcript_verification as tv
from services.espeak.engine import synthesize_script

RATE = 8000
RANGE_BYTES = 64 * 1024
WAVEFORM_POINTS = 800
WALK_STEPS = 8
TOOL_ERRORS = [None] * 22 + ["guard", "pms", "other"]  # ~12% of tool calls fail
CONCEPT_EXAMPLES = [
    "I lost everything at the casino last night", "I can't stop betting on games",
    "I owe the bookie more than I earn", "gambling has wrecked my marriage",
    "I sold my car to cover my betting debts", "I keep chasing my losses online",
    "I borrowed from my kids to gamble", "the slot machines are all I think about",
    "I took out a loan to place more bets", "I hid my gambling from my family",
    "I gamble every time I get paid", "I feel hopeless about my betting",
]
DIALOGUE = [
    ("caller", "Hi, I would like to book an appointment with the physiotherapist."),
    ("agent", "Of course. Can I have your date of birth please?"),
    ("caller", "It is the third of March nineteen eighty."),
    ("agent", "Thank you. I have Tuesday at nine or Wednesday at two."),
    ("caller", "Tuesday at nine works for me."),
    ("agent", "You are booked for Tuesday at nine. Anything else I can help with?"),
    ("caller", "No that is all, thank you very much."),
    ("agent", "Goodbye and have a lovely day."),
]


def timed_ms(run: Callable[[], Any], repeat: int) -> list[float]:
    """Wall milliseconds of each of `repeat` calls of `run`."""
    costs = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        costs.append((time.perf_counter() - started) * 1000)
    return costs


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": percentile(ms, 50), "p95": percentile(ms, 95), "max": max(ms)}


# --- 1. Recordings ----------------------------------------------------------------------


def synthetic_call(path: Path, seconds: int, rng: np.random.Generator) -> Path:
    """A stereo call: each side a tone under noise, the sides taking turns in 0.5-4 s
    stretches (as a conversation does), written as the recorder writes it."""
    frames = seconds * RATE
    t = np.arange(frames) / RATE
    turns = np.cumsum(rng.uniform(0.5, 4.0, size=seconds) * RATE).astype(np.int64)
    caller_speaks = (np.searchsorted(turns, np.arange(frames), side="right") % 2) == 0
    sides = []
    for hz, speaking in ((220.0, caller_speaks), (330.0, ~caller_speaks)):
        signal = 6000 * np.sin(2 * np.pi * hz * t) + rng.normal(0, 2500, frames)
        sides.append(np.clip(signal * np.where(speaking, 1.0, 0.03), -32768, 32767)
                     .astype("<i2").tobytes())
    write_wav(path, interleave(*sides), RATE, 2)
    return path


def recording_costs(path: Path, repeat: int, rng: random.Random) -> dict[str, Any]:
    """The recordings functions the routes run (in a worker thread there), on `path`."""
    cached = rec.channel_path(path, "caller")

    def split_first() -> None:
        cached.unlink(missing_ok=True)
        if rec.channel_wav(path, "caller") != cached:  # the cache must really be written
            raise RuntimeError("channel cache not written")

    def split_cached() -> None:
        if rec.channel_wav(path, "caller") != cached:
            raise RuntimeError("channel cache missed")

    def envelope() -> None:
        if len(rec.waveform(path, WAVEFORM_POINTS).caller) != WAVEFORM_POINTS:
            raise RuntimeError("short waveform")

    size = path.stat().st_size

    def range_read() -> None:
        start = rng.randrange(44, size - RANGE_BYTES)
        wanted = rec.parse_range(f"bytes={start}-{start + RANGE_BYTES - 1}", size)
        if len(b"".join(rec.iter_file(path, wanted.start, wanted.length))) != RANGE_BYTES:
            raise RuntimeError("short range")

    result = {
        "size": size,
        "split_first": summary(timed_ms(split_first, max(3, repeat // 4))),
        "split_cached": summary(timed_ms(split_cached, repeat * 10)),
        "waveform": summary(timed_ms(envelope, repeat)),
        "range": summary(timed_ms(range_read, repeat * 10)),
        "mono_size": cached.stat().st_size,
    }
    cached.unlink()
    return result


async def timed_requests(client: httpx.AsyncClient, requests: dict[str, Callable[[int], Any]],
                         n: int, expect: dict[str, int]) -> dict[str, dict[str, float]]:
    """Each request `n` times after 5 warm-up ones, interleaved round-robin so that load
    from elsewhere on the machine falls on every row alike; each answer is checked."""
    costs: dict[str, list[float]] = {name: [] for name in requests}
    for i in range(-5, n):
        for name, send in requests.items():
            started = time.perf_counter()
            response = await send(i)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != expect[name]:
                raise RuntimeError(f"{name}: HTTP {response.status_code} {response.text[:200]}")
            if i >= 0:
                costs[name].append(elapsed)
    return {name: summary(ms) for name, ms in costs.items()}


async def recording_requests(client: httpx.AsyncClient, headers: dict, calls: dict[str, str],
                             sizes: dict[str, int], n: int, rng: random.Random) -> dict:
    requests: dict[str, Callable[[int], Any]] = {}
    expect: dict[str, int] = {}
    for label, call_id in calls.items():
        def stereo(_: int, call_id: str = call_id, size: int = sizes[label]) -> Any:
            start = rng.randrange(44, size - RANGE_BYTES)
            return client.get(f"/api/calls/{call_id}/recording/stereo", headers={
                **headers, "Range": f"bytes={start}-{start + RANGE_BYTES - 1}"})

        def envelope(_: int, call_id: str = call_id) -> Any:
            return client.get(f"/api/calls/{call_id}/recording/waveform",
                              params={"points": WAVEFORM_POINTS}, headers=headers)

        requests[f"{label}: GET stereo, Range 64 KiB"] = stereo
        expect[f"{label}: GET stereo, Range 64 KiB"] = 206
        requests[f"{label}: GET waveform (800)"] = envelope
        expect[f"{label}: GET waveform (800)"] = 200
    return await timed_requests(client, requests, n, expect)


# --- 2. State guide ---------------------------------------------------------------------


def walk(graph: ContextGraph, rng: random.Random) -> list[tuple[str, str, str]]:
    """A call's path through the graph: (from, exit, to) hops from the initial state."""
    hops, state, came_from = [], graph.initial_state, graph.initial_state
    for _ in range(WALK_STEPS):
        exits = graph.exits_of(state)
        if not exits:
            break
        chosen = rng.choice(exits)
        target = came_from if chosen.to == RETURN else graph.entry_state(chosen.to)
        hops.append((state, chosen.name, target))
        came_from, state = state, target
    return hops


async def add_walks(db: Database, workspace_id: str, graph: ContextGraph,
                    rng: random.Random) -> tuple[int, int]:
    """Transitions and tool calls (from the states' own tools) for every call of the
    workspace, written by COPY."""
    ids = [row["id"] for row in await db.pool.fetch(
        "SELECT id FROM calls WHERE workspace_id = $1", uuid.UUID(workspace_id))]
    transitions, tools = [], []
    for call_id in ids:
        for seq, (before, exit_name, after) in enumerate(walk(graph, rng), start=1):
            transitions.append((call_id, seq, before, after, exit_name, seq * 9000))
            allowed = sorted(graph.state_tools.get(after, ()))
            if allowed:
                error = rng.choice(TOOL_ERRORS)
                tools.append((call_id, f"walk-{seq}", rng.choice(allowed), error is None, error))
    await db.pool.copy_records_to_table("state_transitions", records=transitions, columns=[
        "call_id", "seq", "previous_state", "next_state", "reason", "at_ms"])
    await db.pool.copy_records_to_table("tool_calls", records=tools, columns=[
        "call_id", "tool_call_id", "name", "succeeded", "error_class"])
    return len(transitions), len(tools)


async def guide_costs(client: httpx.AsyncClient, headers: dict, db: Database, graph: ContextGraph,
                      workspace_id: str, service_id: str, calls: int, n: int) -> dict[str, Any]:
    """Per window: the endpoint, its grouped queries alone, the merge alone (µs)."""
    results: dict[str, Any] = {}
    for last in (200, 5000):
        endpoint = await timed_requests(client, {"endpoint": lambda _, last=last: client.get(
            "/api/insights/state-guide", params={"last": last}, headers=headers)},
            n, {"endpoint": 200})
        queries = []
        for _ in range(n):
            started = time.perf_counter()
            seen = await call_aggregates(db.pool, workspace_id, service_id, last)
            queries.append((time.perf_counter() - started) * 1000)
        if seen.calls != min(last, calls):
            raise RuntimeError(f"window of {seen.calls} calls, not {last}")
        merge = timed_ms(lambda seen=seen: state_guide(graph, seen), n * 5)
        guide = state_guide(graph, seen)
        body = await client.get("/api/insights/state-guide", params={"last": last},
                                headers=headers)
        results[last] = {"endpoint": endpoint["endpoint"], "queries": summary(queries),
                         "merge": summary(merge), "body_kib": len(body.content) / 1024,
                         "observed": guide.observed_states,
                         "canonical": guide.canonical_states, "triggers": len(guide.triggers),
                         "tools": len(guide.tools)}
    return results


# --- 3. Control plane -------------------------------------------------------------------


async def control_costs(client: httpx.AsyncClient, headers: dict, n: int) -> dict:
    run = uuid.uuid4().hex[:6]
    requests = {
        "GET /api/voice-settings": lambda _: client.get("/api/voice-settings", headers=headers),
        "PATCH /api/voice-settings": lambda i: client.patch(
            "/api/voice-settings", headers=headers, json={"speed": 0.9 + (i % 3) * 0.05}),
        "POST /api/safety-concepts (12 examples)": lambda i: client.post(
            "/api/safety-concepts", headers=headers, json={
                "key": f"bench_{run}_{i + 5}", "name": "Gambling harm", "severity": "soft",
                "description": "The caller says gambling has put them in danger.",
                "examples": CONCEPT_EXAMPLES}),
        "GET /api/escalations (50)": lambda _: client.get("/api/escalations", headers=headers),
    }
    expect = dict(zip(requests, (200, 200, 201, 200), strict=True))
    return await timed_requests(client, requests, n, expect)


# --- Everything that needs the database and the app --------------------------------------

STARTUP_WORK = ("decoder-warm-up", "prosody-warm-up", "grammar-warm-up", "world-index")


async def startup_settled() -> None:
    """Until the app's start-up work (worker processes spawned and warmed, the world
    index) has ended: it would otherwise compete with the first timed requests."""
    await asyncio.gather(*[task for task in asyncio.all_tasks()
                           if task.get_name() in STARTUP_WORK], return_exceptions=True)


async def through_the_app(directory: Path, calls: int, requests: int,
                          recordings: dict[str, Path], rng: random.Random) -> dict[str, Any]:
    settings = Settings(_env_file=None, data_dir=directory / "db")
    db = await Database.connect(settings)
    try:
        await apply_migrations(db.pool)
        workspace = await repo.create_workspace(db.pool, "bench")
        service = await repo.create_service(db.pool, workspace["id"], "Bench clinic")
        graph = bundled_graph(settings.call.context_graph)
        started = time.perf_counter()
        turns = await add_calls(db, workspace["id"], calls, rng)
        transitions, tools = await add_walks(db, workspace["id"], graph, rng)
        await db.pool.execute("UPDATE calls SET service_id = $1 WHERE workspace_id = $2",
                              uuid.UUID(service["id"]), uuid.UUID(workspace["id"]))
        load_s = time.perf_counter() - started
        await db.pool.execute("VACUUM ANALYZE")
        escalations = await db.pool.fetchval("SELECT count(*) FROM escalations")
        recorded = {}
        for label, path in recordings.items():
            call_id = await repo.create_call(
                db.pool, workspace_id=workspace["id"], service_id=None, call_sid=None,
                direction="inbound", from_number=None, to_number=None, status="completed")
            await repo.update_call(db.pool, call_id, recording_path=str(path))
            recorded[label] = call_id
        headers = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, workspace['id'])}"}
        app = create_app(Settings(_env_file=None, data_dir=directory / "app", database_url=db.dsn,
                                  embedding_provider="local", api_rate_limit_per_minute=10**9))
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            await startup_settled()
            sizes = {label: path.stat().st_size for label, path in recordings.items()}
            recording_http = await recording_requests(client, headers, recorded, sizes,
                                                      requests, rng)
            guide = await guide_costs(client, headers, db, graph, workspace["id"], service["id"],
                                      calls, max(20, requests // 4))
            control = await control_costs(client, headers, requests)
    finally:
        await db.close()
    return {"calls": calls, "turns": turns, "transitions": transitions, "tools": tools,
            "escalations": escalations, "load_s": load_s, "recording_http": recording_http,
            "guide": guide, "control": control, "requests": requests}


# --- 4. Local transcript verification ---------------------------------------------------


async def verification_costs(path: Path, runs: int) -> dict[str, Any]:
    """The dialogue synthesised, laid out on its two channels, verified `runs` times (the
    first also starts the verification's decoder process)."""
    pcm = await synthesize_script([(text, {}) for _, text in DIALOGUE], RATE)
    sides: dict[str, bytearray] = {"caller": bytearray(), "agent": bytearray()}
    clock = RATE // 2 * 2  # bytes: 0.5 s of quiet first
    for (speaker, _), audio in zip(DIALOGUE, pcm, strict=True):
        side = sides[speaker]
        side.extend(bytes(clock - len(side)))
        side.extend(audio)
        clock = len(side) + RATE * 2 * 7 // 10  # 0.7 s before the answer
    write_wav(path, interleave(bytes(sides["caller"]), bytes(sides["agent"])), RATE, 2)
    audio_s = rec.read_wav(path).duration_ms / 1000
    walls = []
    try:
        for _ in range(runs):
            started = time.perf_counter()
            verification = await tv.local_verify(path)
            walls.append(time.perf_counter() - started)
    finally:
        tv.shutdown_local_pool()
    said = " ".join(text for speaker, text in DIALOGUE if speaker == "caller")
    return {"audio_s": audio_s, "walls": walls, "words": len(verification.words),
            "caller_wer": tv.word_error_rate(said, verification.text("caller"))}


# --- 5. Log masking ---------------------------------------------------------------------

CALL = str(uuid.UUID(int=0x3F2A9C1E4B7D4E0A9B1C2D3E4F5A6B7C))
TYPICAL = [
    (f"call {CALL}: transition booking_discovery -> appointment_setting (book_new)",
     {"call_id": CALL}),
    (f"call {CALL}: tool CheckAvailability ok in 182 ms", {"call_id": CALL, "pod": "pod-a"}),
    ("observer connected: workspace 7c1d, 3 watching, replay from seq 41", {}),
    (f"call {CALL}: transcript verified by local:pocketsphinx, 64 words, accuracy 0.912",
     {"call_id": CALL}),
]
PHI_LINE = ("patient name=Ada Byrne dob=1970-01-02 phone=+1 (555) 123-4567 said 'born "
            "January 2, 1970, call me on 555 987 6543 or ada.byrne@example.com', "
            '{"transcript": "my member id is XJH4482291", "email": "a.b@example.org"}')
NESTED = {"call_id": CALL, "patient": {"name": "Ada Byrne", "dob": "1970-01-02",
                                       "phone": 15551234567},
          "turns": [{"speaker": "caller", "text": "my number is 555 123 4567"},
                    {"speaker": "agent", "text": "thank you, booked for 2026-12-01"}],
          "tags": ("booking", "new_patient"), "tools": [{"name": "SearchPatients", "ms": 41}]}


def masking_costs(repeat: int) -> dict[str, float]:
    """µs per `mask_record` (the loguru patcher) on fresh records made beforehand, so each
    timed call masks PHI that is still there."""

    def per_record_us(message: str, extra: dict) -> float:
        records = [{"message": message, "extra": copy.deepcopy(extra)} for _ in range(repeat)]
        started = time.perf_counter()
        for record in records:
            mask_record(record)
        elapsed = time.perf_counter() - started
        if "Ada" in str(records[-1]) or "4567" in str(records[-1]):
            raise RuntimeError("PHI not masked")
        return elapsed / repeat * 1e6

    typical = [per_record_us(message, extra) for message, extra in TYPICAL]
    return {"typical": sum(typical) / len(typical), "phi": per_record_us(PHI_LINE, {}),
            "nested": per_record_us("turn written", NESTED)}


# --- Run and report ---------------------------------------------------------------------


async def main(calls: int, requests: int, minutes: list[int]) -> dict[str, Any]:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    for chatty in ("httpx", "pgserver"):  # a line per request / per server command
        logging.getLogger(chatty).setLevel(logging.WARNING)
    rng, noise = random.Random(2026), np.random.default_rng(2026)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-ops-", dir="/tmp") as name:
        directory = Path(name)
        recordings = {f"{m} min": synthetic_call(directory / f"call-{m}min.wav", m * 60, noise)
                      for m in minutes}
        files = {label: recording_costs(path, 20, rng) for label, path in recordings.items()}
        app = await through_the_app(directory, calls, requests, recordings, rng)
        verification = await verification_costs(directory / "spoken.wav", 3)
    masking = masking_costs(20_000)
    return {"files": files, "app": app, "verification": verification, "masking": masking,
            "load": (load_before, os.getloadavg()[0])}


def _ms(row: dict[str, float]) -> str:
    return f"{row['p50']:.2f} ms | {row['p95']:.2f} ms | {row['max']:.2f} ms"


def render(report: dict[str, Any]) -> str:
    app, files, verification = report["app"], report["files"], report["verification"]
    lines = [
        "## Operations surface: recordings, state guide, control plane, verification, log "
        "masking",
        "",
        measured_line("python -m bench.operations"),
        "",
        "The machine is a shared 2-vCPU VM (other work may run alongside; the 1-minute "
        f"load average was {report['load'][0]:.1f} before and {report['load'][1]:.1f} after): "
        "these are wall-clock numbers, with noise in the tail. HTTP rows go through the real app "
        "in-process (httpx ASGITransport: routing, API-key auth, the hardening middleware, "
        f"pydantic), one request at a time, {app['requests']} per row after 5 warm-up ones, "
        "rows interleaved, once the app's start-up work (worker processes, the world index) "
        "has ended; each answer's status is checked.",
        "",
        "### Recordings",
        "",
        "Synthetic 8 kHz PCM16 stereo WAVs: a tone under noise on each side, the sides "
        "taking turns. Functions of `db/recording_files.py` as the routes call them "
        "(there in a worker thread); the files are in the page cache, as a recently "
        "finished call's are. \"Split, first time\" removes the cached mono file before "
        "each run (read, split, write the 16-bit mono WAV); \"cached\" is the check that "
        "finds it.",
        "",
        "| Recording | operation | runs | p50 | p95 | max |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in files.items():
        name = f"{label} ({r['size'] / 2**20:.2f} MiB; mono {r['mono_size'] / 2**20:.2f} MiB)"
        for key, what in (("split_first", "caller channel split, first time"),
                          ("split_cached", "caller channel split, cached"),
                          ("waveform", f"waveform, {WAVEFORM_POINTS} points"),
                          ("range", "64 KiB range read (parse + `iter_file`)")):
            lines.append(f"| {name} | {what} | {r[key]['n']} | {_ms(r[key])} |")
    lines += ["", "| Request (through the app) | p50 | p95 | max |", "|---|---|---|---|"]
    lines += [f"| {name} | {_ms(r)} |" for name, r in app["recording_http"].items()]
    guide = app["guide"]
    lines += [
        "",
        "### State guide",
        "",
        f"{app['calls']:,} calls of one service (`bench.calls_api.add_calls`: "
        f"{app['turns']:,} turns, {app['escalations']} escalations), each a random walk of up "
        f"to {WALK_STEPS} hops through the bundled graph: {app['transitions']:,} transitions "
        f"and {app['tools']:,} tool calls from the states' own tools (~12% failing as guard, "
        f"pms or other), besides `add_calls`' own; loaded by COPY in {app['load_s']:.1f} s. "
        "\"Queries\" is `db/insights.call_aggregates` (three grouped reads in one "
        "repeatable-read transaction); \"merge\" is `flows/state_guide.state_guide` alone "
        "(pure Python); the endpoint adds the service and graph lookup and the response "
        "model.",
        "",
        "| last N calls | what | runs | p50 | p95 | max |",
        "|---|---|---|---|---|---|",
    ]
    for last, r in guide.items():
        for key, what in (("endpoint", "`GET /api/insights/state-guide`"),
                          ("queries", "grouped queries"), ("merge", "merge")):
            lines.append(f"| {last:,} | {what} | {r[key]['n']} | {_ms(r[key])} |")
    last = guide[max(guide)]
    lines += [
        "",
        f"(The guide over the last {max(guide):,} calls: {last['observed']} of "
        f"{last['canonical']} canonical states observed, {last['triggers']} distinct "
        f"triggers, {last['tools']} tools; the response body is {last['body_kib']:.0f} KiB.) "
        "What the endpoint spends beyond the queries and the merge "
        f"({last['endpoint']['p50'] - last['queries']['p50'] - last['merge']['p50']:.0f} ms "
        "at p50) is the service and graph lookups (about 1 ms each) and building the "
        "response: `dataclasses.asdict` of the guide (it deep-copies every value) and "
        "FastAPI's serialisation of the response model.",
        "",
        "### Control plane",
        "",
        "The POST stores a new concept each time (12 examples embedded by WordLlama, "
        "offline, then one transaction); the PATCH changes the speed; escalations lists "
        "the newest 50 of the workspace's.",
        "",
        "| Request | p50 | p95 | max |",
        "|---|---|---|---|",
        *[f"| {name} | {_ms(r)} |" for name, r in app["control"].items()],
    ]
    walls = verification["walls"]
    warm = walls[1:] or walls
    lines += [
        "",
        "### Local transcript verification",
        "",
        f"`runner/transcript_verification.local_verify` (PocketSphinx in its own decoder "
        f"process) on a {verification['audio_s']:.1f} s stereo recording of an "
        f"eSpeak-synthesised {len(DIALOGUE)}-line dialogue (`synthesize_script`), each side "
        f"on its own channel: {verification['words']} words found, caller-side WER "
        f"{verification['caller_wer']:.2f} against the script. First run (starts the "
        f"decoder process): {walls[0]:.2f} s; then "
        f"{', '.join(f'{w:.2f} s' for w in warm)} — "
        f"**{min(warm) / verification['audio_s']:.3f}–{max(warm) / verification['audio_s']:.3f}"
        " s per second of audio** (one verification at a time per process, off the call path).",
        "",
        "### Log masking",
        "",
        "`lib/log_privacy.mask_record` (the loguru patcher: message and extras), on "
        "records made beforehand so every timed call has PHI to mask:",
        "",
        "| Record | µs each |",
        "|---|---|",
        f"| typical line (no PHI; mean of {len(TYPICAL)} shapes, a call id in the extras) | "
        f"{report['masking']['typical']:.1f} |",
        f"| line full of PHI (name, DOB, phones, spoken date, e-mails, JSON keys) | "
        f"{report['masking']['phi']:.1f} |",
        "| nested extra (patient dict, turns list, tuple; 3 levels) | "
        f"{report['masking']['nested']:.1f} |",
    ]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = bench_parser(__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--minutes", type=int, nargs="+", default=[1, 10],
                        help="recording lengths")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.calls, args.requests, args.minutes))
    publish("operations", render(result), docs=not args.no_docs)
