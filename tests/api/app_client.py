"""The real app in-process on the test's own event loop: its lifespan (runtime) runs, and
requests go through every middleware by ASGI, with no server and no socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from api.app import create_app
from config import Settings


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
