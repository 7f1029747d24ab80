"""A database that cannot answer is a 503 with its reason: never a 500, a 401 or a hang.

Routes bound their database work with `Database.bounded`, which raises
`DatabaseUnavailable` past its deadline or when the database cannot be reached; this
one handler turns that into the answer, and tells the database supervisor to look now.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from loguru import logger

from db.deadline import DatabaseUnavailable

RETRY_AFTER_S = 5


async def database_unavailable(request: Request, error: Exception) -> JSONResponse:
    """503 {"detail": "database unavailable: <what>: <reason>"} with a Retry-After."""
    assert isinstance(error, DatabaseUnavailable)
    logger.warning(f"{request.method} {request.url.path}: database unavailable ({error})")
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        runtime.db_supervisor.nudge()
    return JSONResponse({"detail": f"database unavailable: {error}"}, status_code=503,
                        headers={"Retry-After": str(RETRY_AFTER_S)})


def add_database_errors(app: FastAPI) -> None:
    app.add_exception_handler(DatabaseUnavailable, database_unavailable)
