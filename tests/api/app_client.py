"""The real app in-process on the test's own event loop: its lifespan (runtime) runs, and
requests go through every middleware by ASGI, with no server and no socket.

The offline decoders', prosody analyzer's and grammar pass's worker processes are
process-wide, as in the service, where one app lives as long as its process. Here one
test process runs many apps one after another, so an app's close leaves them running for
the next app (spawning them costs seconds of CPU each time); the session stops them at
its end (`tests/conftest.py`). `stop_worker_pools` itself is tested by
`tests/services/test_auto_transcript_verify.py`. The apps run on the session's event loop
in the main thread, so the workers they spawn outlive each app (a worker ends with the
thread that spawned it: a TestClient's thread would take them with it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from config import Settings
from runner import runtime


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "stop_worker_pools", lambda: None)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield app, client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
