"""Liveness and readiness: database reachability and the active providers; 503 while the
process drains its calls to stop."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from api.deps import get_runtime
from runner.runtime import AppRuntime

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(runtime: AppRuntime = Depends(get_runtime)) -> JSONResponse:
    if runtime.drain.draining:  # stopping: a load balancer sends new calls to the next pod
        return JSONResponse({"status": "draining", "active_calls": len(runtime.active_calls)},
                            status_code=503)
    db_ok = await runtime.db.ping()
    body = {
        "status": "ok" if db_ok else "degraded",
        "database": {"ok": db_ok, "embedded": runtime.db.embedded},
        "providers": runtime.plan.snapshot(),
        "active_calls": len(runtime.active_calls),
    }
    return JSONResponse(body, status_code=200 if db_ok else 503)
