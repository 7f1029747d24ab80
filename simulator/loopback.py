"""Serving a stand-in for a provider's API on this machine's loopback interface."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serve_on_loopback(handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
                            port: int = 0) -> AsyncIterator[str]:
    """Every request to `handle`, on 127.0.0.1 (a free port by default); yields the
    server's base URL, `http://127.0.0.1:PORT`."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - aiohttp has no public one
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        await runner.cleanup()
