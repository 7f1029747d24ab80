"""The HTTP server: uvicorn, with the call drain ahead of its own shutdown.

uvicorn's shutdown closes every WebSocket at once (1012) before the app's lifespan ends,
which would cut live callers off mid-word. So the first SIGTERM or SIGINT starts the
runtime's drain (`runner/drain.py`) while the server keeps serving: the answer webhook
turns new calls away, `/health` answers 503 "draining", each live call hears its last
line and ends. Only then, or at the bound (`SHUTDOWN_DRAIN_S`), does uvicorn's own
shutdown begin. A second signal during the drain ends the calls at once (still recorded
`server_shutdown`) and exits.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from loguru import logger

from runner.runtime import AppRuntime


class DrainingServer(uvicorn.Server):
    """uvicorn.Server whose exit signal drains the calls before shutting down."""

    def __init__(self, config: uvicorn.Config,
                 runtime_of: Callable[[], AppRuntime | None],
                 on_started: Callable[[int], None] | None = None) -> None:
        """`runtime_of()`: the app's runtime once its lifespan has started (else None).
        `on_started(port)`: once the server listens (the port it listens on)."""
        super().__init__(config)
        self._runtime_of = runtime_of
        self._on_started = on_started
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self.drain_task: asyncio.Task | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_started is not None:
            self._on_started(self._port())

    def _port(self) -> int:
        """The port listened on (the configured one, or the one chosen for port 0)."""
        for server in self.servers:
            for listener in server.sockets or ():
                address = listener.getsockname()
                if isinstance(address, tuple):
                    return address[1]
        return self.config.port

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        runtime = self._runtime_of()
        if runtime is None or self._loop is None or not self.started or self.should_exit:
            super().handle_exit(sig, frame)  # not serving yet, or already shutting down
            return
        if self._draining:
            logger.warning("second stop signal: ending every call now")
            self._loop.call_soon_threadsafe(runtime.drain.hurry)
            return
        self._draining = True
        self._captured_signals.append(sig)  # re-raised once uvicorn has finished, as usual
        self._loop.call_soon_threadsafe(self._start_drain, runtime)

    def _start_drain(self, runtime: AppRuntime) -> None:
        self.drain_task = asyncio.ensure_future(self._drain(runtime))

    async def _drain(self, runtime: AppRuntime) -> None:
        try:
            await runtime.drain.finish(runtime.active_calls,
                                       runtime.settings.server.shutdown_drain_s)
        except Exception:  # noqa: BLE001 - stop anyway; the close cancels what is left
            logger.exception("drain failed; shutting down")
        finally:
            self.should_exit = True
