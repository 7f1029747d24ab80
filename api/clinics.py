"""Clinic set-up over HTTP: the workspace's clinics as clinic files (db/clinic), whole or
one part at a time.

Reads need any key; every write needs an admin key and goes the one way an import goes:
the clinic's current file is exported, the part is changed (`api.clinic_parts`), the
whole file is checked as an import checks it, then applied atomically with an audit row
naming the key. A problem answers 422 with each problem's path (and line, for a text
body) and changes nothing; `?dry_run=true` says what a write would change without
applying it. Writes to one clinic are serialised (a database lock held from the export
to the import), so two admins editing at once never undo each other's change.

A clinic keeps its name here: a file (or header) naming another clinic is refused, since
importing it would add that clinic rather than rename this one (POST imports it).
Another workspace's clinic, an unknown id and a malformed one all answer 404.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import asyncpg
from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse, Response
from loguru import logger
from pydantic import BaseModel, Field

from api import clinic_parts as parts
from api.clinic_parts import Part
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from db import control
from db.clinic.file import (
    ClinicFile,
    ClinicFileInvalid,
    Problem,
    dump_clinic_yaml,
    parse_clinic_data,
    parse_clinic_text,
)
from db.clinic.store import ImportResult, export_clinic, import_clinic, list_clinics
from runner.runtime import AppRuntime

# A whole clinic is checked and written in one transaction: more work than a request's
# read, so it has a deadline of its own.
CLINIC_WRITE_TIMEOUT_S = 15.0
MAX_PROBLEMS_SHOWN = 201  # the file's own bound (200) and its "and N more" line
MAX_MESSAGE_CHARS = 500
# A file sent as text: YAML, or JSON text (YAML reads it), with its lines in problems.
TEXT_TYPES = ("application/x-yaml", "application/yaml", "text/yaml", "text/x-yaml",
              "text/plain")
JSON_TYPES = ("application/json",)


# --- Models ------------------------------------------------------------------------


class ClinicSummary(BaseModel):
    id: str
    name: str
    phone_numbers: list[str]
    locations: int = Field(description="Live locations (retired ones not counted).")
    practitioners: int
    appointment_types: int
    closures_upcoming: int = Field(description="Closures that end today or later.")


class ClinicChange(BaseModel):
    clinic_id: str | None = Field(description="The clinic's id (null: a dry run of a new one).")
    created: bool = Field(description="The file added a clinic the workspace did not have.")
    dry_run: bool = Field(description="True: nothing was applied; this is what would be.")
    changes: list[str] = Field(description="What changed (or would), in plain words.")
    warnings: list[str] = Field(description="Applied, but worth a look (e.g. a practitioner "
                                            "retired while bookings still name them).")


class ProblemOut(BaseModel):
    path: str = Field(description='Where in the file, e.g. "schedules[2].blocks[0]"; "" for '
                                  "the file as a whole.")
    line: int | None = Field(description="The line in a text (YAML/JSON) body; null otherwise.")
    message: str


class ProblemsOut(BaseModel):
    problems: list[ProblemOut]


class RefusedOut(BaseModel):
    """A refused request: the clinic file's problems, or FastAPI's field errors for a
    malformed request (a query parameter, a body that is not JSON)."""

    detail: ProblemsOut | list[dict[str, Any]] | str


class ErrorOut(BaseModel):
    detail: str


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    """`schema` with every `#/$defs/...` reference replaced by its definition, so it
    stands alone inside the OpenAPI document (the clinic file has no recursive types)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def _file_body_spec() -> dict[str, Any]:
    """The request body of a whole-file write, for the spec: the file as JSON, or the
    text of a YAML (or JSON) file."""
    schema = ClinicFile.model_json_schema(mode="validation")
    text = {"schema": {"type": "string", "description": "The clinic file's text"}}
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": _inline_refs(schema, schema.get("$defs", {}))},
        **{media: text for media in TEXT_TYPES}}}}


def _answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {
        404: (ErrorOut, "No such clinic (or item) in this workspace"),
        405: (ErrorOut, "The clinic header is one object: it is replaced with PUT"),
        415: (ErrorOut, "The body is neither JSON nor YAML text"),
        422: (RefusedOut, ("The file has problems (each with its path, and line for a "
                           "text body); nothing was changed")),
    }
    return {code: {"model": meaning[code][0], "description": meaning[code][1]}
            for code in codes}


router = APIRouter(prefix="/api/clinics", tags=["clinic set-up"], responses=AUTH_RESPONSES)
read_only = require_role(Role.READ_ONLY)
admin = require_role(Role.ADMIN)
DryRun = Query(default=False, description="Check and say what would change; apply nothing.")


# --- Errors ------------------------------------------------------------------------


def _refused(problems: list[Problem]) -> HTTPException:
    shown = [ProblemOut(path=p.path[:MAX_MESSAGE_CHARS], line=p.line,
                        message=p.message[:MAX_MESSAGE_CHARS])
             for p in problems[:MAX_PROBLEMS_SHOWN]]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                         {"problems": [p.model_dump() for p in shown]})


def _not_found(what: str = "clinic not found") -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, what)


def _change_out(result: ImportResult, *, dry_run: bool) -> ClinicChange:
    new_and_not_kept = dry_run and result.created  # its id was rolled back with it
    return ClinicChange(clinic_id=None if new_and_not_kept else result.service_id,
                        created=result.created,
                        dry_run=dry_run, changes=list(result.changes),
                        warnings=list(result.warnings))


# --- The one way a clinic changes ----------------------------------------------------


@asynccontextmanager
async def _one_writer(pool: asyncpg.Pool, workspace_id: str, name: str) -> AsyncIterator[None]:
    """Held while a clinic is read, changed and written back: a second writer of the same
    clinic (on any pod) waits, then starts from the first one's result."""
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                                 f"clinic-write:{workspace_id}:{name.casefold()}")
        yield


async def _import(runtime: AppRuntime, caller: Caller, clinic: ClinicFile, *,
                  dry_run: bool) -> ImportResult:
    pool = runtime.db.pool
    async with _one_writer(pool, caller.workspace_id, clinic.clinic.name):
        return await import_clinic(pool, caller.workspace_id, clinic, actor=caller.actor,
                                   dry_run=dry_run)


async def _change(runtime: AppRuntime, caller: Caller, clinic_id: str, edit: parts.Edit, *,
                  dry_run: bool) -> ClinicChange:
    """Export the clinic, apply `edit` to its data, check the whole file, import it."""
    pool = runtime.db.pool

    async def work() -> ImportResult:
        service = await control.get_service(pool, caller.workspace_id, clinic_id)
        if service is None:
            raise _not_found()
        async with _one_writer(pool, caller.workspace_id, service["name"]):
            current = await export_clinic(pool, caller.workspace_id, service["id"])
            if current is None:
                raise _not_found()
            data = current.as_data()
            edit(data)
            clinic = parse_clinic_data(data)
            if clinic.clinic.name != current.clinic.name:
                raise ClinicFileInvalid([Problem("clinic.name", None, (
                    f"this clinic is named {current.clinic.name!r} and keeps its name here; "
                    "a file for another clinic is imported with POST /api/clinics"))])
            return await import_clinic(pool, caller.workspace_id, clinic, actor=caller.actor,
                                       dry_run=dry_run)

    try:
        result = await runtime.db.bounded(work(), what="clinic change",
                                          timeout=CLINIC_WRITE_TIMEOUT_S)
    except ClinicFileInvalid as invalid:
        raise _refused(invalid.problems) from None
    except parts.ItemNotFound as missing:
        raise _not_found(str(missing)) from None
    except parts.NotAList as wrong:
        raise HTTPException(status.HTTP_405_METHOD_NOT_ALLOWED, str(wrong)) from None
    logger.info(f"clinic {result.service_id}: {len(result.changes)} changes"
                f"{' (dry run)' if dry_run else ''} by {caller.actor}")
    return _change_out(result, dry_run=dry_run)


async def _file_from_request(request: Request) -> ClinicFile:
    """The clinic file a whole-file write carries: JSON data, or YAML/JSON text."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    as_text = media in TEXT_TYPES
    if not as_text and media not in JSON_TYPES and not media.endswith("+json"):
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                            "send the clinic file as JSON or as YAML text")
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError:
        raise _refused([Problem("", None, "the body is not UTF-8 text")]) from None
    try:
        if as_text:
            return parse_clinic_text(text, source="request body")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise _refused([Problem("", error.lineno, f"not JSON: {error.msg}")]) from None
        return parse_clinic_data(data)
    except ClinicFileInvalid as invalid:
        raise _refused(invalid.problems) from None


# --- Whole clinics -------------------------------------------------------------------


@router.get("", response_model=list[ClinicSummary])
async def clinics(caller: Caller = Depends(read_only),
                  runtime: AppRuntime = Depends(get_runtime)) -> list[dict[str, Any]]:
    """The workspace's clinics, with how much each has set up."""
    return await runtime.db.bounded(list_clinics(runtime.db.pool, caller.workspace_id),
                                    what="clinics read")


@router.post("", response_model=ClinicChange, openapi_extra=_file_body_spec(),
             responses={201: {"model": ClinicChange, "description": "A new clinic was added"},
                        **_answers(415, 422)})
async def import_file(request: Request, response: Response, dry_run: bool = DryRun,
                      caller: Caller = Depends(admin),
                      runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Import a whole clinic file: the clinic it names is updated (what changed, and
    nothing else; bookings are kept), or added (201)."""
    clinic = await _file_from_request(request)
    try:
        result = await runtime.db.bounded(_import(runtime, caller, clinic, dry_run=dry_run),
                                          what="clinic import", timeout=CLINIC_WRITE_TIMEOUT_S)
    except ClinicFileInvalid as invalid:
        raise _refused(invalid.problems) from None
    if result.created and not dry_run:
        response.status_code = status.HTTP_201_CREATED
    logger.info(f"clinic {result.service_id}: imported, {len(result.changes)} changes"
                f"{' (dry run)' if dry_run else ''} by {caller.actor}")
    return _change_out(result, dry_run=dry_run)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "clinic"


@router.get("/{clinic_id}", response_model=ClinicFile,
            responses={200: {"content": {"application/x-yaml": {"schema": {
                "description": "The same file as YAML text, to download"}}},
                             "description": "The clinic file (JSON, or YAML to download)"},
                       **_answers(404)})
async def clinic_file(clinic_id: str,
                      format: Literal["json", "yaml"] = Query(
                          default="json", description="yaml: the file to download"),
                      caller: Caller = Depends(read_only),
                      runtime: AppRuntime = Depends(get_runtime)) -> Response:
    """The clinic as its file says it (export)."""
    current = await _export(runtime, caller, clinic_id)
    if format == "yaml":
        return Response(dump_clinic_yaml(current), media_type="application/x-yaml", headers={
            "Content-Disposition": f'attachment; filename="{_slug(current.clinic.name)}.yaml"'})
    return JSONResponse(current.as_data())


async def _export(runtime: AppRuntime, caller: Caller, clinic_id: str) -> ClinicFile:
    async def work() -> ClinicFile | None:
        service = await control.get_service(runtime.db.pool, caller.workspace_id, clinic_id)
        if service is None:
            return None
        return await export_clinic(runtime.db.pool, caller.workspace_id, service["id"])

    current = await runtime.db.bounded(work(), what="clinic read")
    if current is None:
        raise _not_found()
    return current


@router.put("/{clinic_id}", response_model=ClinicChange, openapi_extra=_file_body_spec(),
            responses=_answers(404, 415, 422))
async def replace_file(clinic_id: str, request: Request, dry_run: bool = DryRun,
                       caller: Caller = Depends(admin),
                       runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Replace the clinic's whole file (it keeps its name)."""
    new = (await _file_from_request(request)).as_data()

    def whole(data: parts.FileData) -> None:
        data.clear()
        data.update(new)

    return await _change(runtime, caller, clinic_id, whole, dry_run=dry_run)


# --- One part at a time --------------------------------------------------------------


@router.get("/{clinic_id}/{part}", response_model=list[dict[str, Any]] | dict[str, Any],
            responses=_answers(404))
async def read_part(clinic_id: str, part: Part, caller: Caller = Depends(read_only),
                    runtime: AppRuntime = Depends(get_runtime)) -> Any:
    """One part of the file: the clinic header (an object) or a section's items."""
    return parts.read((await _export(runtime, caller, clinic_id)).as_data(), part)


@router.put("/{clinic_id}/{part}", response_model=ClinicChange, responses=_answers(404, 422))
async def replace_part(clinic_id: str, part: Part,
                       body: list[dict[str, Any]] | dict[str, Any] = Body(
                           description="The clinic header (an object), or every item of a "
                                       "section (a list)"),
                       dry_run: bool = DryRun, caller: Caller = Depends(admin),
                       runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Replace one part whole; the rest of the file is unchanged."""
    return await _change(runtime, caller, clinic_id, parts.replace_part(part, body),
                         dry_run=dry_run)


@router.post("/{clinic_id}/{part}", response_model=ClinicChange,
             status_code=status.HTTP_201_CREATED, responses=_answers(404, 405, 422))
async def add_item(clinic_id: str, part: Part, body: dict[str, Any] = Body(
                       description="The new item, as the file would say it"),
                   dry_run: bool = DryRun, caller: Caller = Depends(admin),
                   runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Add one item to a section (a name already in use is refused)."""
    return await _change(runtime, caller, clinic_id, parts.add_item(part, body),
                         dry_run=dry_run)


@router.get("/{clinic_id}/{part}/{key:path}", response_model=dict[str, Any],
            responses=_answers(404, 405))
async def read_item(clinic_id: str, part: Part, key: str, caller: Caller = Depends(read_only),
                    runtime: AppRuntime = Depends(get_runtime)) -> Any:
    """One item: by name (locations, practitioners, appointment types) or position
    (schedules, closures: 0 first)."""
    data = (await _export(runtime, caller, clinic_id)).as_data()
    try:
        return parts.read(data, part)[parts.position(data, part, key)]
    except parts.ItemNotFound as missing:
        raise _not_found(str(missing)) from None
    except parts.NotAList as wrong:
        raise HTTPException(status.HTTP_405_METHOD_NOT_ALLOWED, str(wrong)) from None


@router.put("/{clinic_id}/{part}/{key:path}", response_model=ClinicChange,
            responses=_answers(404, 405, 422))
async def replace_item(clinic_id: str, part: Part, key: str, body: dict[str, Any] = Body(
                           description="The item as it should be, whole"),
                       dry_run: bool = DryRun, caller: Caller = Depends(admin),
                       runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Replace one item (a new name renames it)."""
    return await _change(runtime, caller, clinic_id, parts.replace_item(part, key, body),
                         dry_run=dry_run)


@router.delete("/{clinic_id}/{part}/{key:path}", response_model=ClinicChange,
               responses=_answers(404, 405, 422))
async def delete_item(clinic_id: str, part: Part, key: str, dry_run: bool = DryRun,
                      caller: Caller = Depends(admin),
                      runtime: AppRuntime = Depends(get_runtime)) -> ClinicChange:
    """Remove one item (a location, practitioner or type that bookings name is retired,
    not deleted: the warnings say so)."""
    return await _change(runtime, caller, clinic_id, parts.delete_item(part, key),
                         dry_run=dry_run)
