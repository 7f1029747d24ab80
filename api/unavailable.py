"""A database that cannot answer is a 503 with its reason: never a 500, a 401 or a hang.

Routes bound their database work with `Database.bounded`, which raises
`DatabaseUnavailable` past its deadline or when the database cannot be reached; this
one handler turns that into the answer, and tells the database supervisor to look now.
asyncpg's own connection-class errors (work not bounded that way: a lost connection, a
server shutting down or starting up, too many connections) get the same answer.
"""

from __future__ import annotations

from asyncpg import exceptions as pg_errors
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from loguru import logger

from db.deadline import DatabaseUnavailable

RETRY_AFTER_S = 5


# asyncpg errors that say the database, not the request, is the problem.
SERVER_ERRORS: tuple[type[Exception], ...] = (
    pg_errors.PostgresConnectionError, pg_errors.OperatorInterventionError,
    pg_errors.TooManyConnectionsError,
)


async def database_unavailable(request: Request, error: Exception) -> JSONResponse:
    """503 {"detail": "database unavailable: <what>: <reason>"} with a Retry-After."""
    if not isinstance(error, DatabaseUnavailable):
        error = DatabaseUnavailable("request", type(error).__name__, timed_out=False)
    logger.warning(f"{request.method} {request.url.path}: database unavailable ({error})")
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        runtime.db_supervisor.nudge()
    return JSONResponse({"detail": f"database unavailable: {error}"}, status_code=503,
                        headers={"Retry-After": str(RETRY_AFTER_S)})


def add_database_errors(app: FastAPI) -> None:
    for error in (DatabaseUnavailable, *SERVER_ERRORS):
        app.add_exception_handler(error, database_unavailable)
