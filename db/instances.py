"""Service instances: who carries which call, and whether that process is still alive.

Several pods may share one database, so a process that starts (or a sweeper) must
close only the calls of a process that is gone. Each process registers a row and
refreshes its heartbeat in the background. A process on the same machine (same host
name, boot id and PID namespace, so its PID means the same process here) is judged by
its PID and that PID's start time (a PID reused by another process is not it); a
process on the same host name after a reboot (another boot id) is gone; any other is
gone once its heartbeat is stale or it recorded a clean stop.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

PROC = Path("/proc")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def process_start(pid: int, proc: Path = PROC) -> str | None:
    """When process `pid` started, in clock ticks since boot (`/proc/<pid>/stat` field
    22): '' where /proc is not available, None when no such process runs (a zombie
    counts as gone)."""
    if not proc.is_dir():
        return ""
    stat = _read(proc / str(pid) / "stat")
    if not stat:
        return None
    # The command name (field 2) may hold spaces and parentheses: read after the last ')'.
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in {"Z", "X"}:
        return None
    return fields[19]


def _pid_namespace(proc: Path = PROC) -> str:
    try:
        return os.readlink(proc / "self" / "ns" / "pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells this process apart from every other, now and after it is gone."""

    instance_id: str
    hostname: str
    boot_id: str
    pid_namespace: str
    pid: int
    process_start: str

    @classmethod
    def current(cls, instance_id: str, proc: Path = PROC) -> ProcessIdentity:
        pid = os.getpid()
        return cls(
            instance_id=instance_id, hostname=socket.gethostname(),
            boot_id=_read(proc / "sys" / "kernel" / "random" / "boot_id"),
            pid_namespace=_pid_namespace(proc), pid=pid,
            process_start=process_start(pid, proc) or "",
        )

    def same_machine(self, row: dict[str, Any]) -> bool:
        """`row`'s PID names a process this one can look up (same host, boot, namespace)."""
        return (row["hostname"] == self.hostname and row["boot_id"] == self.boot_id
                and row["pid_namespace"] == self.pid_namespace)

    def rebooted_since(self, row: dict[str, Any]) -> bool:
        """`row` ran on this host name before its last reboot."""
        return (row["hostname"] == self.hostname and bool(row["boot_id"])
                and bool(self.boot_id) and row["boot_id"] != self.boot_id)


def pid_alive(pid: int, started: str, proc: Path = PROC) -> bool:
    """Whether process `pid` still runs and is the one that started at `started`."""
    now = process_start(pid, proc)
    if now is None:
        return False
    if now and started:
        return now == started
    try:  # no /proc: ask the kernel whether the PID exists at all
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_is_gone(me: ProcessIdentity, row: dict[str, Any] | None, *, stale: bool) -> bool:
    """Whether the instance `row` (None: unknown) can no longer carry a call. `stale`: its
    heartbeat is older than the bound."""
    if row is None or row["stopped_at"] is not None:
        return True
    if row["id"] == me.instance_id:
        return False
    if me.same_machine(row):
        if row["pid"] == me.pid and row["process_start"] == me.process_start:
            return False
        return not pid_alive(row["pid"], row["process_start"])
    if me.rebooted_since(row):
        return True
    return stale


async def register(pool: asyncpg.Pool | asyncpg.Connection, me: ProcessIdentity) -> None:
    """Record this process (again, if its row was pruned), heartbeat now."""
    await pool.execute(
        """INSERT INTO service_instances
               (id, hostname, boot_id, pid_namespace, pid, process_start)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), stopped_at = NULL""",
        me.instance_id, me.hostname, me.boot_id, me.pid_namespace, me.pid, me.process_start,
    )


async def heartbeat(pool: asyncpg.Pool, me: ProcessIdentity) -> None:
    """This process is alive (re-registered if its row is missing)."""
    updated = await pool.execute(
        "UPDATE service_instances SET heartbeat_at = now() WHERE id = $1", me.instance_id)
    if updated != "UPDATE 1":
        await register(pool, me)


async def stopped(pool: asyncpg.Pool, me: ProcessIdentity) -> None:
    """This process stops cleanly: whatever it left open is no one's now."""
    await pool.execute(
        "UPDATE service_instances SET stopped_at = now() WHERE id = $1", me.instance_id)


async def gone_owners(pool: asyncpg.Pool, me: ProcessIdentity, *, stale_after_s: float
                      ) -> list[str]:
    """The owners of open calls that are gone (this process excluded)."""
    rows = await pool.fetch(
        """SELECT o.owner_instance AS owner, i.id, i.hostname, i.boot_id, i.pid_namespace,
                  i.pid, i.process_start, i.stopped_at,
                  i.heartbeat_at < now() - make_interval(secs => $2) AS stale
           FROM (SELECT DISTINCT owner_instance FROM calls
                 WHERE ended_at IS NULL AND owner_instance IS NOT NULL
                   AND owner_instance <> $1) o
           LEFT JOIN service_instances i ON i.id = o.owner_instance""",
        me.instance_id, stale_after_s,
    )
    return [row["owner"] for row in rows
            if owner_is_gone(me, dict(row) if row["id"] is not None else None,
                             stale=bool(row["stale"]))]


async def prune(pool: asyncpg.Pool, *, older_than_s: float) -> int:
    """Forget instances silent for longer than `older_than_s` that carry no open call."""
    status = await pool.execute(
        """DELETE FROM service_instances i
           WHERE i.heartbeat_at < now() - make_interval(secs => $1)
             AND NOT EXISTS (SELECT 1 FROM calls c
                             WHERE c.owner_instance = i.id AND c.ended_at IS NULL)""",
        older_than_s,
    )
    return int(status.rsplit(" ", 1)[-1])
