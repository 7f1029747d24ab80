"""Context graph versions stored per workspace (and optionally per service).

A version is immutable once stored: saving the same graph id and version again is
refused, so a call's snapshot (graph id + version) always names exactly what ran.
A service uses its own latest version of its graph if it has one, else the workspace's,
else the bundled file.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from db.repositories import as_uuid


class GraphVersionExists(Exception):
    """This graph id and version are already stored for the workspace."""


async def save_graph(
    pool: asyncpg.Pool, workspace_id: str, definition: dict[str, Any],
    service_id: str | None = None,
) -> int:
    """Store one validated graph definition; returns its version."""
    try:
        await pool.execute(
            """INSERT INTO context_graphs (workspace_id, service_id, graph_id, version, definition)
               VALUES ($1, $2, $3, $4, $5)""",
            uuid.UUID(workspace_id), as_uuid(service_id), definition["id"],
            definition["version"], definition,
        )
    except asyncpg.UniqueViolationError:
        raise GraphVersionExists(f"{definition['id']} v{definition['version']}") from None
    return int(definition["version"])


async def latest_graph(
    pool: asyncpg.Pool, workspace_id: str, service_id: str | None, graph_id: str
) -> dict[str, Any] | None:
    """The newest stored definition for the service (its own first, then the workspace's)."""
    return await pool.fetchval(
        """SELECT definition FROM context_graphs
           WHERE workspace_id = $1 AND graph_id = $3 AND (service_id = $2 OR service_id IS NULL)
           ORDER BY (service_id IS NULL), version DESC LIMIT 1""",
        uuid.UUID(workspace_id), as_uuid(service_id), graph_id,
    )


async def graph_version(
    pool: asyncpg.Pool, workspace_id: str, service_id: str | None, graph_id: str, version: int
) -> dict[str, Any] | None:
    """One stored version of a graph for the service (its own first, then the
    workspace's); None when it is not stored."""
    return await pool.fetchval(
        """SELECT definition FROM context_graphs
           WHERE workspace_id = $1 AND graph_id = $3 AND version = $4
             AND (service_id = $2 OR service_id IS NULL)
           ORDER BY (service_id IS NULL) LIMIT 1""",
        uuid.UUID(workspace_id), as_uuid(service_id), graph_id, version,
    )
