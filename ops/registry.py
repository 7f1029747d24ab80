"""The active-call registry: which calls run now, on which pod, in what state.

Every pod (every worker process) keeps its own calls in memory (`add`/`update`/`remove`
are synchronous and cheap: the call's path touches nothing else). `LocalRegistry` (one
process) answers from that. The shared registries write them out with a heartbeat
(`HeartbeatRegistry`): a process beats every third of `call_registry_ttl_s` and writes a
new or changed call within `FLUSH_S`; an entry not beaten for the TTL is gone, so a dead
process's calls vanish after it. `RedisRegistry` keeps each call as a key
`ops:call:<id>` (JSON, expiring after the TTL) plus a member of its workspace's sorted
set scored by expiry; `ops/postgres_registry.PostgresRegistry` keeps them in a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis.asyncio as aioredis
from loguru import logger

from ops.redis_link import Outage, connect

FLUSH_S = 0.25  # a changed call reaches Redis within this


class RegistryUnavailable(Exception):
    """The shared registry did not answer."""


@dataclass
class ActiveCall:
    """One running call as every pod sees it."""

    call_id: str
    workspace_id: str
    service_id: str | None
    pod_id: str
    started_at: float  # Unix time
    mode: str = "phone"
    state: str | None = None
    emotion: dict[str, Any] | None = None
    latency: dict[str, Any] | None = None
    suspended: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ActiveCall:
        known = {key: value[key] for key in cls.__dataclass_fields__ if key in value}
        return cls(**known)


class CallRegistry:
    """This pod's calls; subclasses say where every pod's calls are read from."""

    def __init__(self, pod_id: str) -> None:
        self.pod_id = pod_id
        self.local: dict[str, ActiveCall] = {}

    def add(self, entry: ActiveCall) -> None:
        self.local[entry.call_id] = entry
        self._changed(entry.call_id)

    def update(self, call_id: str, **fields: Any) -> None:
        """Change a running call's entry (state, emotion, latency); unknown calls ignored."""
        entry = self.local.get(call_id)
        if entry is None:
            return
        for key, value in fields.items():
            setattr(entry, key, value)
        self._changed(call_id)

    def remove(self, call_id: str) -> None:
        entry = self.local.pop(call_id, None)
        if entry is not None:
            self._removed(entry)

    def _changed(self, call_id: str) -> None:
        """Hook: a call was added or changed."""

    def _removed(self, entry: ActiveCall) -> None:
        """Hook: a call ended (its last entry)."""

    async def active(self, workspace_id: str) -> list[ActiveCall]:
        raise NotImplementedError

    async def get(self, call_id: str) -> ActiveCall | None:
        raise NotImplementedError

    async def start(self) -> None:
        """Begin heart-beating (a no-op in process)."""

    async def close(self) -> None:
        """Stop; this pod's calls leave the registry."""


class LocalRegistry(CallRegistry):
    """One pod: the registry is this pod's memory."""

    async def active(self, workspace_id: str) -> list[ActiveCall]:
        return sorted((e for e in self.local.values() if e.workspace_id == workspace_id),
                      key=lambda e: e.started_at)

    async def get(self, call_id: str) -> ActiveCall | None:
        return self.local.get(call_id)


def call_key(call_id: str) -> str:
    return f"ops:call:{call_id}"


def workspace_key(workspace_id: str) -> str:
    return f"ops:calls:{workspace_id}"


class HeartbeatRegistry(CallRegistry):
    """This process's calls written to a shared store, kept alive by its heartbeat;
    subclasses say how they are stored (`_store`) and read (`active`, `get`)."""

    backend = "Redis"

    def __init__(self, pod_id: str, *, ttl_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(pod_id)
        self._ttl_s = ttl_s
        self._clock = clock
        self._dirty: set[str] = set()
        self._gone: set[tuple[str, str]] = set()  # (call_id, workspace_id) to delete
        self._wake = asyncio.Event()
        self._outage = Outage("call registry", self.backend)
        self._task: asyncio.Task | None = None

    def _changed(self, call_id: str) -> None:
        self._dirty.add(call_id)
        self._wake.set()

    def _removed(self, entry: ActiveCall) -> None:
        self._gone.add((entry.call_id, entry.workspace_id))
        self._dirty.discard(entry.call_id)
        self._wake.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._beat_loop(), name="ops-registry-beat")

    async def close(self) -> None:
        """Stop beating and take this pod's calls out at once (a crash leaves them to the TTL)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for call_id in list(self.local):
            self.remove(call_id)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._write(set(), full=False), 2.0)
        await self._disconnect()

    async def _beat_loop(self) -> None:
        beat_s = self._ttl_s / 3
        last_beat = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), beat_s)
            self._wake.clear()
            now = time.monotonic()
            full = now - last_beat >= beat_s
            ids = set(self.local) if full else set(self._dirty)
            self._dirty.clear()
            try:
                await self._write(ids, full=full)
                self._outage.ok()
                if full:
                    last_beat = now
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - calls go on; retried next beat
                self._outage.failed(error)
                self._dirty |= ids & set(self.local)
            await asyncio.sleep(FLUSH_S)  # gathers a burst of changes into one write

    async def _write(self, ids: set[str], *, full: bool) -> None:
        """Entries `ids` (re)written with a fresh TTL; ended calls deleted (`full`: a whole
        beat, when a store may also sweep what expired)."""
        gone, self._gone = self._gone, set()
        entries = [entry for call_id in ids if (entry := self.local.get(call_id)) is not None]
        try:
            await self._store(entries, gone, full=full)
        except BaseException:
            self._gone |= gone
            raise

    async def _store(self, entries: list[ActiveCall], gone: set[tuple[str, str]], *,
                     full: bool) -> None:
        raise NotImplementedError

    async def _disconnect(self) -> None:
        """Let go of the store's connection."""

    @staticmethod
    def _parse(raw: bytes | str) -> ActiveCall | None:
        try:
            return ActiveCall.from_dict(json.loads(raw))
        except (TypeError, ValueError):
            logger.warning("call registry: unreadable entry ignored")
            return None


class RedisRegistry(HeartbeatRegistry):
    """Several pods: entries in Redis, kept alive by this pod's heartbeat."""

    def __init__(self, url: str, pod_id: str, *, ttl_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(pod_id, ttl_s=ttl_s, clock=clock)
        self._redis: aioredis.Redis = connect(url)

    async def _store(self, entries: list[ActiveCall], gone: set[tuple[str, str]], *,
                     full: bool) -> None:
        expires = self._clock() + self._ttl_s
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.set(call_key(entry.call_id), json.dumps(entry.to_dict(), default=str),
                         px=int(self._ttl_s * 1000))
                pipe.zadd(workspace_key(entry.workspace_id), {entry.call_id: expires})
            for call_id, workspace_id in gone:
                pipe.delete(call_key(call_id))
                pipe.zrem(workspace_key(workspace_id), call_id)
            await pipe.execute()

    async def _disconnect(self) -> None:
        with contextlib.suppress(Exception):
            await self._redis.aclose()

    async def active(self, workspace_id: str) -> list[ActiveCall]:
        key = workspace_key(workspace_id)
        try:
            await self._redis.zremrangebyscore(key, "-inf", self._clock())
            ids = await self._redis.zrange(key, 0, -1)
            raw = await self._redis.mget([call_key(i.decode()) for i in ids]) if ids else []
        except Exception as error:
            self._outage.failed(error)
            raise RegistryUnavailable from error
        entries = [self._parse(item) for item in raw if item is not None]
        return sorted((e for e in entries if e is not None and e.workspace_id == workspace_id),
                      key=lambda e: e.started_at)

    async def get(self, call_id: str) -> ActiveCall | None:
        try:
            raw = await self._redis.get(call_key(call_id))
        except Exception as error:
            self._outage.failed(error)
            raise RegistryUnavailable from error
        return None if raw is None else self._parse(raw)
