"""The real app in-process, its lifespan (runtime) running: on the test's own event loop
with requests through every middleware by ASGI (`running_app`, no server and no socket),
or under Starlette's TestClient on a thread and loop of its own (`app_in_testclient`).
Both leave the worker pools to the next app (`tests/worker_pools.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from config import Settings
from runner import runtime
from tests.worker_pools import pools_left_to_the_next_app, worker_processes


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
    before = worker_processes()
    spawned: set[int] = set()
    with pools_left_to_the_next_app(), \
            TestClient(create_app(settings), **client_options) as client:
        try:
            yield client
        finally:
            spawned = worker_processes() - before
    if spawned:
        runtime.stop_worker_pools()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
