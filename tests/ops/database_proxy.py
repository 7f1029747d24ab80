"""A TCP proxy in front of the session's embedded PostgreSQL (Unix socket), for tests of a
database that turns slow (`freeze`: bytes stop flowing, connections stay open) or dies
(`cut`: every connection closed, new ones refused) and comes back (`restore`)."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlparse

SOCKET_NAME = ".s.PGSQL.5432"


def socket_path(dsn: str) -> str:
    """Where the embedded server listens, from its DSN (`...?host=/dir`)."""
    return f"{parse_qs(urlparse(dsn).query)['host'][0]}/{SOCKET_NAME}"


class DatabaseProxy:
    def __init__(self, dsn: str) -> None:
        self._socket = socket_path(dsn)
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_in: asyncio.StreamReader,
                     client_out: asyncio.StreamWriter) -> None:
        try:
            server_in, server_out = await asyncio.open_unix_connection(self._socket)
        except OSError:
            client_out.close()
            return
        self._writers |= {client_out, server_out}
        await asyncio.gather(self._pump(client_in, server_out),
                             self._pump(server_in, client_out), return_exceptions=True)
        for writer in (client_out, server_out):
            self._writers.discard(writer)
            writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            await self._flowing.wait()
            writer.write(data)
            await writer.drain()
        writer.close()

    def freeze(self) -> None:
        """The database stops answering (nothing passes); connections stay open."""
        self._flowing.clear()

    async def cut(self) -> None:
        """The database is gone: open connections closed, new ones refused."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.close()
        if server is not None:
            await server.wait_closed()
        self._flowing.set()

    async def restore(self) -> None:
        """Answering again, on the same port."""
        self._flowing.set()
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        await self.cut()
