"""The control plane: workspace voice settings, safety concepts, service keyterms and the
operator's actions on escalations; an acknowledgement or resolution of a running call's
escalation is also an `escalation` observer event on that call
(`OpsPlane.escalation_changed`).

API key required: reads for any role, escalations for an operator, changes to settings,
concepts and keyterms for an admin (each audited in the change's own transaction). Every
read and write is scoped to the key's workspace, and another workspace's service, concept
or escalation is "not found". Nothing here is cached: each
new call resolves its profile from the database (`AppRuntime._load_profile`), so a
change takes effect from the workspace's next call, never in the middle of one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Response, status
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from call.voice_settings import (
    FieldPolicy,
    PlainText,
    Term,
    VoiceSettings,
    VoiceSettingsInput,
    call_keyterms,
    clean_terms,
    parse_voice_settings,
    stored_fields,
    voice_settings_policy,
)
from db import audit, control
from db import repositories as repo
from processors.safety import concept_store as safety_db
from processors.safety.concepts import ConceptSpec, Severity, default_concepts
from runner.runtime import AppRuntime
from services.keyterms import MAX_KEYTERMS


class ErrorOut(BaseModel):
    detail: Any


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents (besides 422), so the OpenAPI spec is exact."""
    meaning = {400: "The body is not JSON", 404: "Not found in this workspace",
               409: "Conflicts with a default or an existing concept",
               503: "The embedder (or database) is unavailable; nothing was stored"}
    return {code: {"model": ErrorOut, "description": meaning[code]} for code in codes}


router = APIRouter(prefix="/api", tags=["control plane"], responses={
    **AUTH_RESPONSES, 401: {"model": ErrorOut, "description": "Missing or invalid API key"},
    403: {"model": ErrorOut, "description": AUTH_RESPONSES[403]["description"]}})
READ_ONLY = require_role(Role.READ_ONLY)
OPERATOR = require_role(Role.OPERATOR)
ADMIN = require_role(Role.ADMIN)

# Embedding a new concept's examples: WordLlama takes milliseconds, a cloud embedder
# has its own 3 s timeout; past this the request fails (503) and nothing is stored.
CONCEPT_EMBED_TIMEOUT_S = 10.0
MAX_ESCALATION_ID = 2**63 - 1
CONCEPT_KEY = r"^[a-z][a-z0-9_]*$"


# --- Voice settings ------------------------------------------------------------


class VoiceSettingsOut(BaseModel):
    effective: VoiceSettings = Field(description="What the workspace's next call runs with.")
    stored: dict[str, Any] | None = Field(description="The settings as stored (null: none).")
    problems: list[str] = Field(description="Stored values a call ignores, and why.")
    policy: list[FieldPolicy] = Field(description="How emotion adaptation may affect each field.")


async def _voice_settings_out(runtime: AppRuntime, workspace_id: str) -> VoiceSettingsOut:
    raw = await runtime.db.bounded(repo.get_voice_settings_raw(runtime.db.pool, workspace_id),
                                   what="voice settings read")
    effective, problems = parse_voice_settings(raw)
    return VoiceSettingsOut(effective=effective, stored=raw if isinstance(raw, dict) else None,
                            problems=problems, policy=list(voice_settings_policy()))


async def _store_voice_settings(runtime: AppRuntime, caller: Caller, action: str,
                                stored: Callable[[Any], dict[str, Any]]) -> None:
    """Replace the stored settings with `stored(raw)` (raw: what is stored now) and
    audit before and after, in one transaction; the row is locked, so two admins'
    changes never interleave."""
    async def change(conn) -> None:
        await conn.execute("SELECT 1 FROM voice_settings WHERE workspace_id = $1 FOR UPDATE",
                           repo.as_uuid(caller.workspace_id))
        before = await repo.get_voice_settings_raw(conn, caller.workspace_id)
        after = stored(before)
        await repo.set_voice_settings(conn, caller.workspace_id, after)
        await audit.record_change(conn, caller.workspace_id, actor=caller.actor,
                                  action=action, target="voice settings",
                                  before=before, after=after)

    await in_transaction(runtime, change, what="voice settings write")


@router.get("/voice-settings", response_model=VoiceSettingsOut)
async def get_voice_settings(caller: Caller = Depends(READ_ONLY),
                             runtime: AppRuntime = Depends(get_runtime)) -> VoiceSettingsOut:
    """The workspace's effective voice settings (defaults for anything not stored)."""
    return await _voice_settings_out(runtime, caller.workspace_id)


@router.put("/voice-settings", response_model=VoiceSettingsOut,
            responses=_errors(400))
async def put_voice_settings(body: VoiceSettingsInput,
                             caller: Caller = Depends(ADMIN),
                             runtime: AppRuntime = Depends(get_runtime)) -> VoiceSettingsOut:
    """Replace the settings: the fields given are stored, the rest follow the defaults."""
    stored = body.model_dump(mode="json", exclude_unset=True)
    await _store_voice_settings(runtime, caller, "voice_settings.replace", lambda _: stored)
    logger.info(f"workspace {caller.workspace_id}: voice settings replaced ({sorted(stored)})")
    return await _voice_settings_out(runtime, caller.workspace_id)


@router.patch("/voice-settings", response_model=VoiceSettingsOut,
              responses=_errors(400))
async def patch_voice_settings(body: VoiceSettingsInput,
                               caller: Caller = Depends(ADMIN),
                               runtime: AppRuntime = Depends(get_runtime)) -> VoiceSettingsOut:
    """Change the fields given; the other stored fields stay as they are."""
    changes = body.model_dump(mode="json", exclude_unset=True)

    def merged(raw: Any) -> dict[str, Any]:
        try:
            valid = VoiceSettingsInput.model_validate({**stored_fields(raw), **changes})
        except ValidationError as error:  # a stored value the strict rules refuse
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
                {"loc": ["stored", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                for err in error.errors()]) from error
        return valid.model_dump(mode="json", exclude_unset=True)

    await _store_voice_settings(runtime, caller, "voice_settings.update", merged)
    logger.info(f"workspace {caller.workspace_id}: voice settings changed ({sorted(changes)})")
    return await _voice_settings_out(runtime, caller.workspace_id)


# --- Safety concepts -----------------------------------------------------------


class ConceptIn(BaseModel):
    """A workspace concept: described by example utterances a caller might say."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=CONCEPT_KEY, max_length=60)
    name: PlainText = Field(min_length=1, max_length=80)
    severity: Severity = Field(description="hard: the agent is suspended for a human; "
                               "soft: queued for an operator, the call goes on.")
    description: PlainText = Field(min_length=1, max_length=300)
    examples: list[Annotated[PlainText, Field(max_length=300)]] = Field(min_length=1,
                                                                       max_length=50)

    @field_validator("examples")
    @classmethod
    def _one_line_each(cls, examples: list[str]) -> list[str]:
        return [" ".join(example.split()) for example in examples]


class ConceptOut(BaseModel):
    key: str
    name: str
    severity: Severity
    description: str
    examples: list[str]
    builtin: bool = Field(description="A default concept: always active, read-only.")
    crisis: bool = False
    created_at: datetime | None = None
    embedding_models: list[str] = Field(
        default_factory=list, description="Models with stored example embeddings (the "
        "defaults are embedded in memory at start-up, none stored).")


def _builtin_concepts() -> list[ConceptOut]:
    return [ConceptOut(key=c.key, name=c.name, severity=c.severity, description=c.description,
                       examples=list(c.examples), builtin=True, crisis=c.crisis)
            for c in default_concepts()]


@router.get("/safety-concepts", response_model=list[ConceptOut])
async def list_safety_concepts(caller: Caller = Depends(READ_ONLY),
                               runtime: AppRuntime = Depends(get_runtime)) -> list[ConceptOut]:
    """The default concepts (builtin) and then the workspace's own."""
    own = await runtime.db.bounded(
        safety_db.list_safety_concepts(runtime.db.pool, caller.workspace_id),
        what="safety concepts read")
    return _builtin_concepts() + [ConceptOut(**row, builtin=False) for row in own]


@router.post("/safety-concepts", response_model=ConceptOut, status_code=status.HTTP_201_CREATED,
             responses=_errors(400, 409, 503))
async def create_safety_concept(body: ConceptIn, caller: Caller = Depends(ADMIN),
                                runtime: AppRuntime = Depends(get_runtime)) -> ConceptOut:
    """Store a concept with its examples' embeddings; active from the workspace's next call.
    409 for a default's key or one the workspace has; 503 when the embedder fails."""
    workspace_id = caller.workspace_id
    spec = ConceptSpec(**body.model_dump())
    embedder = runtime.safety.embedder

    async def audited(conn) -> None:
        await audit.record_change(conn, workspace_id, actor=caller.actor,
                                  action="safety_concept.create", target=spec.key,
                                  after=body.model_dump(mode="json"))

    try:
        await runtime.db.bounded(safety_db.create_safety_concept(
            runtime.db.pool, workspace_id, spec, embedder, then=audited),
            what="safety concept create", timeout=CONCEPT_EMBED_TIMEOUT_S)
    except safety_db.ConceptError as error:
        raise HTTPException(status.HTTP_409_CONFLICT, str(error)) from error
    except Exception as error:  # noqa: BLE001 - embedder or database down; the insert is
        # one transaction after the embedding, so nothing is half-stored
        logger.warning(f"workspace {workspace_id}: safety concept not created "
                       f"({type(error).__name__})")
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "the examples could not be embedded and stored; nothing was "
                            "stored, try again") from error
    logger.info(f"workspace {workspace_id}: safety concept {spec.key} created")
    (created,) = [row for row in await runtime.db.bounded(safety_db.list_safety_concepts(
        runtime.db.pool, workspace_id), what="safety concepts read") if row["key"] == spec.key]
    return ConceptOut(**created, builtin=False)


@router.delete("/safety-concepts/{key}", status_code=status.HTTP_204_NO_CONTENT,
               responses=_errors(404, 409))
async def delete_safety_concept(key: str, caller: Caller = Depends(ADMIN),
                                runtime: AppRuntime = Depends(get_runtime)) -> Response:
    """Remove one of the workspace's concepts (409 for a default: always active)."""
    workspace_id = caller.workspace_id
    if key in {c.key for c in default_concepts()}:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"{key!r} is a default concept, always active")

    async def delete(conn) -> bool:
        deleted = await safety_db.delete_safety_concept(conn, workspace_id, key)
        if deleted is not None:
            await audit.record_change(conn, workspace_id, actor=caller.actor,
                                      action="safety_concept.delete", target=key,
                                      before=deleted)
        return deleted is not None

    if not re.fullmatch(CONCEPT_KEY, key) or not await in_transaction(
            runtime, delete, what="safety concept delete"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "safety concept not found")
    logger.info(f"workspace {workspace_id}: safety concept {key} deleted")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- Services and their keyterms -----------------------------------------------


class ServiceOut(BaseModel):
    id: str
    name: str
    phone_numbers: list[str]
    keyterms: list[str]
    graph_id: str


class KeytermsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keyterms: list[Term] = Field(
        max_length=MAX_KEYTERMS, description=f"At most {MAX_KEYTERMS}, each 1-60 characters; "
        "whitespace collapsed, case-insensitive duplicates dropped.")

    @field_validator("keyterms")
    @classmethod
    def _clean(cls, keyterms: list[str]) -> list[str]:
        return clean_terms(keyterms)


class KeytermsOut(BaseModel):
    service_id: str
    keyterms: list[str] = Field(description="The service's own layer (first priority).")
    workspace_keyterms: list[str] = Field(description="From the workspace voice settings.")
    system_keyterms: list[str] = Field(description="The deployment's defaults (SYSTEM_KEYTERMS).")
    effective: list[str] = Field(description="What a call's speech recognizer is given.")


async def _keyterms_out(runtime: AppRuntime, workspace_id: str,
                        service: dict[str, Any]) -> KeytermsOut:
    voice, _problems = parse_voice_settings(
        await runtime.db.bounded(repo.get_voice_settings_raw(runtime.db.pool, workspace_id),
                                 what="voice settings read"))
    system = list(runtime.settings.call.system_keyterms)
    return KeytermsOut(
        service_id=service["id"], keyterms=service["keyterms"],
        workspace_keyterms=list(voice.keyterms), system_keyterms=system,
        effective=call_keyterms(service["keyterms"], voice, system))


def _found(service: dict[str, Any] | None) -> dict[str, Any]:
    if service is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "service not found")
    return service


@router.get("/services", response_model=list[ServiceOut])
async def list_services(caller: Caller = Depends(READ_ONLY),
                        runtime: AppRuntime = Depends(get_runtime)) -> list[dict[str, Any]]:
    # Rows as they are: `response_model` picks the fields, validates and serialises once.
    return await runtime.db.bounded(
        control.list_services(runtime.db.pool, caller.workspace_id), what="services read")


@router.get("/services/{service_id}/keyterms", response_model=KeytermsOut,
            responses=_errors(404))
async def get_service_keyterms(service_id: str, caller: Caller = Depends(READ_ONLY),
                               runtime: AppRuntime = Depends(get_runtime)) -> KeytermsOut:
    service = _found(await runtime.db.bounded(
        control.get_service(runtime.db.pool, caller.workspace_id, service_id),
        what="service read"))
    return await _keyterms_out(runtime, caller.workspace_id, service)


@router.put("/services/{service_id}/keyterms", response_model=KeytermsOut,
            responses=_errors(400, 404))
async def put_service_keyterms(service_id: str, body: KeytermsIn,
                               caller: Caller = Depends(ADMIN),
                               runtime: AppRuntime = Depends(get_runtime)) -> KeytermsOut:
    """Replace the service's keyterms (the first layer of each call's merge)."""
    workspace_id = caller.workspace_id

    async def replace(conn) -> dict[str, Any] | None:
        before = await control.get_service(conn, workspace_id, service_id)
        if before is None:
            return None
        after = await control.set_service_keyterms(conn, workspace_id, service_id,
                                                   body.keyterms)
        await audit.record_change(conn, workspace_id, actor=caller.actor,
                                  action="keyterms.replace", target=before["id"],
                                  before=before["keyterms"], after=after["keyterms"])
        return after

    service = _found(await in_transaction(runtime, replace, what="keyterms write"))
    logger.info(f"service {service['id']}: {len(body.keyterms)} keyterms stored")
    return await _keyterms_out(runtime, workspace_id, service)


# --- Escalations ---------------------------------------------------------------


class EscalationOut(BaseModel):
    id: int
    call_id: str
    seq: int
    concept: str
    severity: Severity
    similarity: float | None
    judge: str | None
    reason: str | None
    at_ms: int | None
    status: control.EscalationStatus
    created_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None


class OperatorIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operator: PlainText = Field(min_length=1, max_length=80, description="Who is acting.")


def _escalation(row: dict[str, Any] | None) -> EscalationOut:
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "escalation not found")
    return EscalationOut(**row)


async def _operator_acted(
    act: Callable[[Any, str, int, str], Awaitable[control.EscalationAction]],
    escalation_id: int, body: OperatorIn, workspace_id: str, runtime: AppRuntime,
) -> EscalationOut:
    """An operator's action (`act`: acknowledge or resolve) and the escalation after it;
    a change reaches the call's observers (through the pod running it; a finished call
    has only the stored change)."""
    action = await runtime.db.bounded(
        act(runtime.db.pool, workspace_id, escalation_id, body.operator),
        what="escalation update")
    out = _escalation(action.escalation)
    if action.changed and action.escalation is not None:
        await runtime.ops.escalation_changed(workspace_id, action.escalation,
                                             status=out.status, operator=body.operator)
    return out


@router.get("/escalations", response_model=list[EscalationOut])
async def list_escalations(
    status_filter: control.EscalationStatus | None = Query(None, alias="status"),
    limit: int = Query(50, ge=1, le=repo.MAX_LIST_LIMIT),
    caller: Caller = Depends(OPERATOR), runtime: AppRuntime = Depends(get_runtime),
) -> list[dict[str, Any]]:
    """The workspace's escalations, newest first (all, or of one status)."""
    # Rows as they are: `response_model` validates and serialises them once.
    return await runtime.db.bounded(
        control.list_escalations(runtime.db.pool, caller.workspace_id, status=status_filter,
                                 limit=limit),
        what="escalations read")


@router.post("/escalations/{escalation_id}/acknowledge", response_model=EscalationOut,
             responses=_errors(400, 404))
async def acknowledge_escalation(
    body: OperatorIn, escalation_id: int = Path(ge=1, le=MAX_ESCALATION_ID),
    caller: Caller = Depends(OPERATOR), runtime: AppRuntime = Depends(get_runtime),
) -> EscalationOut:
    """An operator has seen it (idempotent: the first acknowledgement stands). A running
    call's observers see an `escalation` event with the new status."""
    return await _operator_acted(control.acknowledge_escalation, escalation_id, body,
                                 caller.workspace_id, runtime)


@router.post("/escalations/{escalation_id}/resolve", response_model=EscalationOut,
             responses=_errors(400, 404))
async def resolve_escalation(
    body: OperatorIn, escalation_id: int = Path(ge=1, le=MAX_ESCALATION_ID),
    caller: Caller = Depends(OPERATOR), runtime: AppRuntime = Depends(get_runtime),
) -> EscalationOut:
    """Closed (idempotent: the first resolution stands). A running call's observers see
    an `escalation` event with the new status."""
    return await _operator_acted(control.resolve_escalation, escalation_id, body,
                                 caller.workspace_id, runtime)
