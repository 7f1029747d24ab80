"""The real app in-process, its lifespan (runtime) running: on the test's own event loop
with requests through every middleware by ASGI (`running_app`, no server and no socket),
or under Starlette's TestClient on a thread and loop of its own (`app_in_testclient`).

The offline decoders', prosody analyzer's and grammar pass's worker processes are
process-wide, as in the service, where one app lives as long as its process. A test
process runs many apps one after another, so an app's close here leaves them running for
the next app (spawning them costs seconds of CPU each time); the session stops them at
its end (`tests/conftest.py`). `stop_worker_pools` itself is tested by
`tests/services/test_auto_transcript_verify.py`. A worker ends with the thread that
spawned it: `running_app`'s run on the session's loop in the main thread, and a
TestClient's app finds them started there (`worker_pools_started`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from config import Settings
from runner import runtime


@contextmanager
def pools_left_to_the_next_app() -> Iterator[None]:
    """Within it, an app's close leaves the worker pools running."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "stop_worker_pools", lambda: None)
        yield


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    with pools_left_to_the_next_app():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield app, client


@contextmanager
def app_in_testclient(settings: Settings, **client_options: Any) -> Iterator[TestClient]:
    """The app under TestClient. The worker pools it finds running (`worker_pools_started`)
    are left to the next app; if it spawned workers itself, on the client's thread, they
    end with that thread, so the pools are stopped after it, as its close would have."""
    before = _worker_processes()
    spawned: set[int] = set()
    with pools_left_to_the_next_app(), \
            TestClient(create_app(settings), **client_options) as client:
        try:
            yield client
        finally:
            spawned = _worker_processes() - before
    if spawned:
        runtime.stop_worker_pools()


def _worker_processes() -> set[int]:
    return {process.pid for process in multiprocessing.active_children()}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
