"""The stop signal drains the calls before uvicorn's own shutdown (which would close every
call's socket at once); a second signal ends them at once; before the app is up, a
signal stops the server as uvicorn always does."""

from __future__ import annotations

import asyncio
import signal
import time
from types import SimpleNamespace

import uvicorn

from api.server import DrainingServer
from config import Settings
from runner.drain import CallDrain


def serving(runtime) -> DrainingServer:
    server = DrainingServer(uvicorn.Config(app=lambda *_: None), runtime_of=lambda: runtime)
    server.started = True
    server._loop = asyncio.get_running_loop()  # set by serve()
    return server


def runtime_with(*calls) -> SimpleNamespace:
    runtime = SimpleNamespace(drain=CallDrain(), active_calls={},
                              settings=Settings(_env_file=None, shutdown_drain_s=10))
    for number, call in enumerate(calls):
        runtime.active_calls[f"call-{number}"] = asyncio.create_task(call(runtime))
    return runtime


async def says_goodbye(runtime) -> None:
    await runtime.drain.wait_begun()
    await asyncio.sleep(0.3)  # its last line plays


async def never_ends(_runtime) -> None:
    await asyncio.sleep(3600)


async def test_sigterm_lets_the_calls_end_before_the_server_shuts_down():
    runtime = runtime_with(says_goodbye)
    server = serving(runtime)

    server.handle_exit(signal.SIGTERM, None)
    await asyncio.sleep(0.1)

    assert runtime.drain.draining and not server.should_exit  # still serving, turning calls away
    await asyncio.wait_for(server.drain_task, 5)
    assert server.should_exit and runtime.active_calls["call-0"].done()
    assert not runtime.active_calls["call-0"].cancelled()


async def test_a_second_signal_during_the_drain_ends_the_calls_at_once():
    runtime = runtime_with(never_ends)
    server = serving(runtime)
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.sleep(0.1)
    started = time.perf_counter()

    server.handle_exit(signal.SIGINT, None)
    await asyncio.wait_for(server.drain_task, 5)

    assert time.perf_counter() - started < 1.0
    assert server.should_exit and runtime.active_calls["call-0"].cancelled()
    assert server._captured_signals == [signal.SIGTERM]  # re-raised at exit
    assert not server.force_exit  # the lifespan still closes the runtime (records flushed)


async def test_before_the_app_is_up_a_signal_stops_the_server_at_once():
    server = DrainingServer(uvicorn.Config(app=lambda *_: None), runtime_of=lambda: None)

    server.handle_exit(signal.SIGTERM, None)

    assert server.should_exit and server.drain_task is None
