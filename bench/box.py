"""One bench process per CPU, as the service runs one worker process per CPU.

Each process has its own event loop, turn models, analyzer pools and calls; the parent
splits a level's calls between them, starts them at the same moment and merges what
they measured. That is the box's capacity, where the per-process series is one worker's.
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import asyncio
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType

from loguru import logger

from bench.call_driver import (
    LOCAL,
    CallResult,
    LevelRun,
    first_calls,
    run_level,
    share_decoders,
    worker_factory,
)
from lib import event_loop

START_MARGIN_S = 1.0  # the jobs reach every process before the common start


@dataclass(frozen=True)
class BoxSpec:
    pipeline: str  # "bare" or "ours"
    voices: str
    decoders_per_process: int  # PocketSphinx decoders each process starts (LOCAL voices)


def decoders_per_process(processes: int) -> int:
    """The box's CPUs shared out: one PocketSphinx decoder per CPU of the box in all, where
    each process left to itself (`DecoderPool.shared()`) would start one per CPU."""
    return max(1, (os.cpu_count() or 2) // processes)


def split(calls: int, processes: int) -> list[int]:
    """`calls` shared out as evenly as they go, the first processes taking the remainder."""
    return [calls // processes + (1 if index < calls % processes else 0)
            for index in range(processes)]


def merge(runs: list[LevelRun]) -> LevelRun:
    result = CallResult()
    for run in runs:
        result.extend(run.result)
    return LevelRun(result, sum(run.rss_growth_kib for run in runs),
                    max((run.wall_s for run in runs), default=0.0), sum(run.cpu_s for run in runs))


async def warm_up(voices: str) -> None:
    """What AppRuntime.start loads before the first call: turn models, analyzer pools."""
    from services.pocketsphinx.stt import DecoderPool
    from services.prosody.emotion import ProsodyPool
    from services.turn_models import load_turn_models

    load_turn_models()
    await ProsodyPool.shared().warm_up()
    if voices == LOCAL:
        await DecoderPool.shared().warm_up()


def _serve(conn: Connection, spec: BoxSpec, workdir: Path, speech: bytes) -> None:
    """A box process: warm up, then run each level it is sent until it is sent None."""
    logger.remove()
    logger.add(sys.stderr, level="INFO")  # what `make run` logs
    if spec.voices == LOCAL:
        share_decoders(spec.decoders_per_process)
    event_loop.run(_jobs(conn, spec, workdir, speech))


async def _jobs(conn: Connection, spec: BoxSpec, workdir: Path, speech: bytes) -> None:
    await warm_up(spec.voices)
    make = worker_factory(spec.pipeline, workdir, spec.voices)
    await first_calls([make], speech)
    conn.send("ready")
    try:
        while (job := await asyncio.to_thread(conn.recv)) is not None:
            calls, turns, start_at = job
            await asyncio.sleep(max(0.0, start_at - time.time()))
            conn.send(await run_level(make, speech, calls, turns))
    finally:
        stop_pools()


def stop_pools() -> None:
    """Stop this process's analyzer and decoder workers."""
    from services.pocketsphinx.stt import DecoderPool
    from services.prosody.emotion import ProsodyPool

    for pool in DecoderPool.started() + ProsodyPool.started():
        pool.shutdown()


def pool_processes() -> dict[int, str]:
    """This process's decoder and analyzer worker processes by pid, for the CPU profile."""
    from services.pocketsphinx.stt import DecoderPool
    from services.prosody.emotion import ProsodyPool

    labels = {}
    for name, pools in (("PocketSphinx decoders", DecoderPool.started()),
                        ("prosody analyzer", ProsodyPool.started())):
        for pool in pools:
            executor = pool._pool._executor  # noqa: SLF001 - the pool's live workers
            for pid in getattr(executor, "_processes", None) or {}:
                labels[pid] = name
    return labels


class Box:
    """`processes` bench processes held ready for a series of levels."""

    def __init__(self, spec: BoxSpec, workdir: Path, speech: bytes,
                 processes: int | None = None) -> None:
        self.spec = spec
        self.processes = processes or os.cpu_count() or 2
        context = multiprocessing.get_context("spawn")
        self._links: list[tuple[multiprocessing.Process, Connection]] = []
        for _ in range(self.processes):
            parent, child = context.Pipe()
            # Not a daemon: daemons may not start the analyzer and decoder pools.
            process = context.Process(target=_serve, args=(child, spec, workdir, speech))
            process.start()
            child.close()  # the process holds it now: a crash ends the parent's reads
            self._links.append((process, parent))

    def __enter__(self) -> Box:
        for _, conn in self._links:
            if conn.recv() != "ready":
                raise RuntimeError("a box process did not warm up")
        return self

    def run_level(self, calls: int, turns: int) -> LevelRun:
        """The level's calls split across the processes, started together (blocks)."""
        start_at = time.time() + START_MARGIN_S
        shares = split(calls, self.processes)
        for (_, conn), share in zip(self._links, shares):
            conn.send((share, turns, start_at))
        return merge([conn.recv() for _, conn in self._links])

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for process, conn in self._links:
            try:
                conn.send(None)
            except OSError:
                pass
            process.join(30)
            if process.is_alive():
                process.terminate()
