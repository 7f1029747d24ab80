"""The HTTP server: uvicorn, with the call drain ahead of its own shutdown.

uvicorn's shutdown closes every WebSocket at once (1012) before the app's lifespan ends,
which would cut live callers off mid-word. So the first SIGTERM or SIGINT starts the
runtime's drain (`runner/drain.py`) while the server keeps serving: the answer webhook
turns new calls away, `/health` answers 503 "draining", each live call hears its last
line and ends. Only then, or at the bound (`SHUTDOWN_DRAIN_S`), does uvicorn's own
shutdown begin. A second signal during the drain ends the calls at once (still recorded
`server_shutdown`) and exits.

A worker process of several (`api/workers.py`) hears its supervisor too: SIGUSR1 asks
it to drain (nothing more when a stop signal of its own, its process group's Ctrl-C,
got there first), SIGUSR2 to end its calls at once (the supervisor heard a second
signal). So a signal the whole process group received is never counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn
from loguru import logger

from config import Settings
from lib import event_loop
from lib.log_privacy import uvicorn_log_config
from runner.runtime import AppRuntime

DRAIN_REQUEST = signal.SIGUSR1  # from the supervisor: drain, as a first stop signal does
HURRY_REQUEST = signal.SIGUSR2  # from the supervisor: end every call now


def server_config(settings: Settings, app: Any, *, worker: str | None = None) -> uvicorn.Config:
    """The HTTP server's configuration. Forwarded headers are honoured from the proxies
    `FORWARDED_ALLOW_IPS` names only, so limits counted per client address count the
    caller behind the proxy, and nobody else can choose the address they are counted by.
    `worker`: the worker process's name its log lines carry."""
    return uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        ws_max_size=max(settings.telephony.ws_max_message_bytes * 4, 1 << 20),
        log_level=settings.server.log_level.lower(),
        log_config=uvicorn_log_config(worker),  # no key from a query string in the access log
        loop=event_loop.uvicorn_loop(),
        lifespan="on",
        proxy_headers=True,
        forwarded_allow_ips=settings.server.forwarded_allow_ips,
    )


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
        self._captured_signals.append(sig)  # re-raised once uvicorn has finished, as usual
        self._begin_drain(runtime)

    def handle_supervisor(self, sig: int, frame: FrameType | None) -> None:
        """The supervisor asks this worker to drain (`DRAIN_REQUEST`) or to end its calls
        now (`HURRY_REQUEST`)."""
        runtime = self._runtime_of()
        if runtime is None or self._loop is None or not self.started or self.should_exit:
            self.should_exit = True  # not serving yet, or already shutting down
            return
        if sig == HURRY_REQUEST:
            logger.warning("the supervisor heard a second stop signal: ending every call now")
            self._loop.call_soon_threadsafe(runtime.drain.hurry)
            if not self._draining:
                self._begin_drain(runtime)
        elif not self._draining:
            self._begin_drain(runtime)

    def _begin_drain(self, runtime: AppRuntime) -> None:
        self._draining = True
        self._loop.call_soon_threadsafe(self._start_drain, runtime)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's stop signals, and the supervisor's two requests."""
        with super().capture_signals():
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_supervisor)
                        for sig in (DRAIN_REQUEST, HURRY_REQUEST)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

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
