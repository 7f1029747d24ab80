"""Embedded PostgreSQL 16 + pgvector from the `pgserver` wheel: no database to install.

pgserver keeps the data under a directory of ours, picks a short socket directory
when the path is too long for a Unix socket, and shares one server between
processes using the same directory (the service and the CLI), stopping it when
the last one lets go.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from loguru import logger


class EmbeddedPostgres:
    """One handle on the embedded server for this process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server = None

    async def start(self) -> str:
        """Start (or join) the server; returns an asyncpg-usable DSN."""
        import pgserver

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._server = await asyncio.to_thread(
            pgserver.get_server, self.data_dir.resolve(), cleanup_mode="stop"
        )
        logger.info(f"embedded PostgreSQL ready (data in {self.data_dir})")
        return self._server.get_uri()

    async def stop(self) -> None:
        """Let go of the server; it stops when no other process still uses it."""
        if self._server is not None:
            server, self._server = self._server, None
            await asyncio.to_thread(server.cleanup)
