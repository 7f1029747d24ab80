"""The active-call registry in PostgreSQL (`ops_active_calls`), when there is no
`REDIS_URL`: the worker processes of a machine (and pods sharing the database) list and
command each other's calls.

Each process writes its calls with an expiry `call_registry_ttl_s` ahead and beats
every third of it (`ops/registry.HeartbeatRegistry`); reads skip expired rows, and a
whole beat deletes them, so a dead process's calls vanish after the TTL. Writes go
through the operations plane's own connection (`ops/postgres_link.py`), never the
pool: a slow database delays no call. The link is closed by whoever made it.
"""

from __future__ import annotations

import json

from ops.postgres_link import PostgresLink
from ops.registry import ActiveCall, HeartbeatRegistry, RegistryUnavailable

_UPSERT = """INSERT INTO ops_active_calls (call_id, workspace_id, pod_id, entry, expires_at)
             VALUES ($1, $2, $3, $4::jsonb, now() + make_interval(secs => $5))
             ON CONFLICT (call_id) DO UPDATE SET workspace_id = EXCLUDED.workspace_id,
                 pod_id = EXCLUDED.pod_id, entry = EXCLUDED.entry,
                 expires_at = EXCLUDED.expires_at"""


class PostgresRegistry(HeartbeatRegistry):
    backend = "PostgreSQL"

    def __init__(self, link: PostgresLink, pod_id: str, *, ttl_s: float) -> None:
        super().__init__(pod_id, ttl_s=ttl_s)
        self._link = link

    async def _store(self, entries: list[ActiveCall], gone: set[tuple[str, str]], *,
                     full: bool) -> None:
        rows = [(entry.call_id, entry.workspace_id, self.pod_id,
                 json.dumps(entry.to_dict(), default=str), float(self._ttl_s))
                for entry in entries]

        async def write(conn) -> None:
            async with conn.transaction():
                if rows:
                    await conn.executemany(_UPSERT, rows)
                if gone:
                    await conn.execute(
                        "DELETE FROM ops_active_calls WHERE call_id = ANY($1::text[]) "
                        "AND pod_id = $2", [call_id for call_id, _ in gone], self.pod_id)
                if full:
                    await conn.execute("DELETE FROM ops_active_calls WHERE expires_at < now()")

        await self._link.run(write)

    async def active(self, workspace_id: str) -> list[ActiveCall]:
        try:
            rows = await self._link.run(lambda conn: conn.fetch(
                """SELECT entry::text AS entry FROM ops_active_calls
                   WHERE workspace_id = $1 AND expires_at > now()""", workspace_id))
        except Exception as error:
            self._outage.failed(error)
            raise RegistryUnavailable from error
        entries = [self._parse(row["entry"]) for row in rows]
        return sorted((e for e in entries if e is not None and e.workspace_id == workspace_id),
                      key=lambda e: e.started_at)

    async def get(self, call_id: str) -> ActiveCall | None:
        try:
            raw = await self._link.run(lambda conn: conn.fetchval(
                """SELECT entry::text FROM ops_active_calls
                   WHERE call_id = $1 AND expires_at > now()""", call_id))
        except Exception as error:
            self._outage.failed(error)
            raise RegistryUnavailable from error
        return None if raw is None else self._parse(raw)
