"""What a refused request is told: a 422 names each invalid field and shows a bounded
excerpt of what was sent, never the whole input back (a body may be up to the body limit,
and what it carries may be PHI)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

MAX_ECHOED_CHARS = 200  # longest string of the input (or message) a 422 repeats
MAX_REPORTED_ERRORS = 20  # errors listed; past them, one entry says how many more
MAX_ECHOED_ITEMS = 10  # items of a list or object in the input repeated


def bounded(value: Any, depth: int = 0) -> Any:
    """`value` as JSON can carry it, each string cut to `MAX_ECHOED_CHARS`, each list and
    object to `MAX_ECHOED_ITEMS`, nesting to three levels, non-finite numbers as text."""
    if isinstance(value, str):
        if len(value) <= MAX_ECHOED_CHARS:
            return value
        return f"{value[:MAX_ECHOED_CHARS]}… ({len(value)} characters)"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth >= 3:
        return "…"
    if isinstance(value, dict):
        items = list(value.items())
        shown = {str(k)[:MAX_ECHOED_CHARS]: bounded(v, depth + 1)
                 for k, v in items[:MAX_ECHOED_ITEMS]}
        if len(items) > MAX_ECHOED_ITEMS:
            shown["…"] = f"{len(items) - MAX_ECHOED_ITEMS} more"
        return shown
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        shown = [bounded(v, depth + 1) for v in items[:MAX_ECHOED_ITEMS]]
        if len(items) > MAX_ECHOED_ITEMS:
            shown.append(f"… {len(items) - MAX_ECHOED_ITEMS} more")
        return shown
    return bounded(str(value), depth)


def validation_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """FastAPI's error list, each error's input, message and context bounded."""
    shown = [bounded(jsonable_encoder(error)) for error in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_REPORTED_ERRORS:
        shown.append({"type": "too_many_errors", "loc": [],
                      "msg": f"{len(errors) - MAX_REPORTED_ERRORS} more errors not shown"})
    return shown


async def request_validation_error(_request: Request, error: RequestValidationError
                                   ) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": validation_errors(error.errors())})


def add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, request_validation_error)
