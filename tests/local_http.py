"""Local servers on free loopback ports: the home of every local provider fake."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager

from aiohttp import web
from websockets.asyncio.server import ServerConnection, serve


@asynccontextmanager
async def serve_http(app: web.Application) -> AsyncIterator[str]:
    """Yields the base URL (`http://127.0.0.1:PORT`) while the app serves."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serve_websocket(
    handler: Callable[[ServerConnection], Awaitable[None]],
) -> AsyncIterator[str]:
    """Yields the base URL (`ws://127.0.0.1:PORT`) while `handler` serves each connection."""
    async with serve(handler, "127.0.0.1", 0) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def event_stream(request: web.Request, events: Iterable[bytes]) -> web.StreamResponse:
    """A complete `text/event-stream` response made of already encoded events."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in events:
        await response.write(event)
    await response.write_eof()
    return response
