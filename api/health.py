"""Liveness and readiness: database reachability and the active providers.

`status` is `ok` (200) only when the database answers now and its supervisor has
finished any recovery (pool refreshed, spool replayed); `degraded` (503) while it does
not answer; `recovering` (503) while the embedded server restarts or the spool replays.
The database check is bounded (`DB_PING_TIMEOUT_S`) even when the server is frozen.
`draining` (503) while the process drains its calls to stop, so a load balancer sends
new calls to the next pod. `worker` says which of the machine's worker processes
answered (`WORKERS`), and `active_calls` counts that process's calls.
"""

from __future__ import annotations

import os

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from api.deps import get_runtime
from db.deadline import unwinding
from runner.runtime import AppRuntime

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(runtime: AppRuntime = Depends(get_runtime)) -> JSONResponse:
    if runtime.drain.draining:  # stopping: a load balancer sends new calls to the next pod
        return JSONResponse({"status": "draining", "active_calls": len(runtime.active_calls)},
                            status_code=503)
    reason = await runtime.db.probe()
    supervisor = runtime.db_supervisor.status()
    if reason is None and supervisor.state == "ok":
        status = "ok"
    else:
        status = "recovering" if reason is None or supervisor.state == "recovering" else "degraded"
        if (reason is None) != (supervisor.state == "ok"):
            runtime.db_supervisor.nudge()  # it answers again, or just failed: look now
    place = runtime.place
    body = {
        "status": status,
        "worker": {"index": place.index + 1, "of": place.count, "pid": os.getpid()},
        "database": {
            **supervisor.as_dict(), "ok": reason is None, "embedded": runtime.db.embedded,
            "reason": reason or supervisor.reason, "abandoned_work": unwinding(),
        },
        "providers": runtime.plan.snapshot(),
        "active_calls": len(runtime.active_calls),
    }
    return JSONResponse(body, status_code=200 if status == "ok" else 503)
