"""The FastAPI app: every route, the hardening middleware, and the runtime for its lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api import (
    audit,
    calls,
    clinics,
    control,
    dashboard,
    handoff_webhooks,
    health,
    insights,
    keys,
    media_stream,
    observe,
    outbound_voice,
    patients,
    payment_webhooks,
    recordings,
    reminders,
    stt_suggestions,
    tasks,
    text_webhooks,
    transcripts,
    voice,
    workspaces,
    world,
)
from api.errors import add_error_handlers
from api.middleware import add_hardening
from api.unavailable import add_database_errors
from config import Settings
from runner.box import WorkerPlace
from runner.job_kinds import job_kinds
from runner.runtime import AppRuntime


def create_app(settings: Settings, place: WorkerPlace | None = None) -> FastAPI:
    """The HTTP + WebSocket app; the runtime (DB, writer, providers) lives for its lifespan
    (`place`: which of the machine's worker processes runs it; None: the only one)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.runtime = await AppRuntime.start(settings, place)
        if settings.server.job_worker_enabled:
            app.state.runtime.start_jobs(job_kinds(app.state.runtime))
        try:
            yield
        finally:
            await app.state.runtime.close()

    app = FastAPI(title="Clinic voice agent", lifespan=lifespan)
    # observe before calls: its /api/calls/active must not be read as a call id; reminders
    # before clinics: /api/clinics/{id}/reminders is not a part of the clinic file.
    for module in (health, voice, handoff_webhooks, outbound_voice, media_stream, observe, calls, recordings,
                   transcripts, world, control, insights, keys, workspaces, audit, reminders,
                   clinics, tasks, patients, text_webhooks, payment_webhooks, stt_suggestions,
                   dashboard):
        app.include_router(module.router)
    add_hardening(app, settings)  # security headers, body size limit, per-key rate limit
    add_database_errors(app)  # a database that cannot answer: 503 with the reason
    add_error_handlers(app)  # a 422 echoes a bounded excerpt of the input
    return app
