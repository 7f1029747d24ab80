"""pydantic's validation errors, said plainly: which field, what is wrong, what to write."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from db.clinic.problems import Path, short

# What one item of a section is called in a message.
_ITEM = {"locations": "location", "practitioners": "practitioner",
         "appointment_types": "appointment type", "schedules": "schedule",
         "closures": "closure", "clinic": "the clinic section"}


def field_errors(error: ValidationError, root: type[BaseModel]) -> list[tuple[Path, str]]:
    """(path, plain reason) for each error pydantic found."""
    return [_explain(tuple(e["loc"]), e, root) for e in error.errors()]


def _explain(loc: Path, error: Any, root: type[BaseModel]) -> tuple[Path, str]:
    kind, field, value = error["type"], _field(loc), error.get("input")
    if kind == "missing":
        if loc == ("version",):
            return loc, "the file must start with `version: 1`"
        return loc[:-1], f"{_owner(loc[:-1])} is missing '{loc[-1]}'"
    if kind == "extra_forbidden":
        known = _fields_of(_model_at(root, loc[:-1]))
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f": did you mean '{guess[0]}'?" if guess else (
            f" (known: {', '.join(known)})" if known else "")
        return loc, f"unknown field '{loc[-1]}'{hint}"
    if kind in ("value_error", "assertion_error"):
        return loc, str(error["ctx"].get("error", error["msg"])) if "ctx" in error else error["msg"]
    return loc, f"{field} {_reason(kind, error, value)}"


def _reason(kind: str, error: Any, value: Any) -> str:
    ctx = error.get("ctx") or {}
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"should be a whole number, not {short(value)}"
    if kind == "string_type":
        return f"should be text, not {short(value)} (put it in quotes)"
    if kind == "list_type":
        return f"should be a list, not {short(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"should be a set of fields (key: value), not {short(value)}"
    if kind == "string_too_short":
        return "should not be empty"
    if kind == "too_short":
        return "should list at least one"
    if kind in ("string_too_long", "too_long"):
        limit = ctx.get("max_length")
        return f"is too long (at most {limit})" if limit is not None else "is too long"
    if kind == "string_pattern_mismatch":
        return f"should be a three-letter currency code like USD, not {short(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{error['msg'].removeprefix('Input ').lower()}, not {short(value)}"
    return f"{error['msg'].lower()} (got {short(value)})"


def _field(loc: Path) -> str:
    """The field a loc ends in, as the file names it ("blocks[0][1]" stays "blocks")."""
    names = [part for part in loc if isinstance(part, str)]
    return f"'{names[-1]}'" if names else "the file"


def _owner(path: Path) -> str:
    if not path:
        return "the file"
    if len(path) >= 2 and isinstance(path[-1], int) and path[-2] in _ITEM:
        return f"{_ITEM[str(path[-2])]} {path[-1] + 1}"
    if path == ("clinic",):
        return _ITEM["clinic"]
    return f"'{path[-1]}'"


def _model_at(root: type[BaseModel], path: Path) -> type[BaseModel] | None:
    """The model that validates the mapping at `path`, following fields and list items."""
    current: Any = root
    for part in path:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            match = next((f for name, f in current.model_fields.items()
                          if part in (name, f.alias)), None)
            current = match.annotation if match else None
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """X | None → X; Annotated[X, ...] → X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = options[0] if len(options) == 1 else annotation
            if len(options) != 1:
                return annotation
        else:
            return annotation


def _fields_of(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]
