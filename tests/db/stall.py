"""A stalled PostgreSQL for tests: its processes frozen with SIGSTOP, always thawed after.

A frozen postmaster accepts connections into its backlog and never answers them; a
frozen backend never answers its client, nor the cancel the postmaster forwards it.
That is what a stalled database looks like from asyncpg, with no fakes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable, Iterator

import asyncpg
import psutil

from db.pool import APPLICATION_NAME


@contextlib.contextmanager
def frozen(pids: Iterable[int]) -> Iterator[list[int]]:
    """SIGSTOP every pid (yielded), and SIGCONT them all on the way out, whatever happens."""
    stopped: list[int] = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield stopped
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


async def service_processes(dsn: str) -> list[int]:
    """The postmaster of the server behind `dsn` and every backend serving the service's
    pools (application_name `voice-agent`): freezing them stalls the service's database
    while other clients' open connections (e.g. a test's own) keep working."""
    conn = await asyncpg.connect(dsn)
    try:
        postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid()
        backends = [row["pid"] for row in await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1", APPLICATION_NAME)]
    finally:
        await conn.close()
    return [postmaster, *backends]
