"""Twilio voice webhooks: answer a call with a media stream, record status callbacks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request, Response
from loguru import logger

from api.deps import get_runtime
from api.twilio_auth import media_stream_url, verified_form
from call.call_session import CompletionReason
from db import repositories as repo
from db.deadline import Budget
from db.writer import TurnedAwayCall
from lib.redaction import loggable, mask_phone
from runner.runtime import AppRuntime
from services.twilio import PHONE_SAMPLE_RATE
from services.twilio.twiml import (
    busy_twiml,
    not_in_service_twiml,
    stream_twiml,
    unavailable_twiml,
)

router = APIRouter(prefix="/voice", tags=["voice"])

# The call's row is written even when the lookups used the budget up (a slow but live
# database): a caller put through with no row would have no record.
MIN_WRITE_S = 0.3
TERMINAL_STATUSES = {"completed", "busy", "failed", "no-answer", "canceled"}


def _xml(twiml: str) -> Response:
    return Response(twiml, media_type="application/xml")


@router.post("/answer")
async def answer(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    call_sid, to_number = form.get("CallSid"), form.get("To")
    logger.info(f"incoming call to {mask_phone(to_number)} from {mask_phone(form.get('From'))}")
    budget = Budget(runtime.settings.storage.db_request_timeout_s)  # all of its lookups
    call_id = str(uuid.uuid4())  # chosen now: a call turned away is kept under it
    try:
        existing = await runtime.db.bounded(
            repo.find_call_by_sid(runtime.db.pool, call_sid), what="call lookup",
            timeout=budget.left(),
        )
    except Exception as error:
        logger.error(f"answer webhook: cannot look the call up ({type(error).__name__})")
        return _xml(_unavailable(runtime, form, call_id, "call lookup", error))
    if existing is not None:
        return _xml(_answer_again(request, runtime, existing))
    if not runtime.has_capacity():
        return _xml(await _turn_away_busy(runtime, form, call_id, budget))
    profile = await runtime.resolve_profile(call_id, to_number, timeout=budget.left())
    if not profile.in_service:
        return _xml(_not_in_service(runtime, form, call_id))
    try:
        await runtime.db.bounded(
            repo.create_call(
                runtime.db.pool, workspace_id=profile.workspace_id, service_id=profile.service_id,
                call_sid=call_sid, direction="inbound", from_number=form.get("From"),
                to_number=to_number, status="ringing",
                config_snapshot=runtime.snapshot(profile),
                owner_instance=runtime.identity.instance_id, call_id=call_id,
                stream_setup=runtime.stream_setup(profile),
            ),
            what="call creation", timeout=max(budget.left(), MIN_WRITE_S),
        )
    except Exception as error:
        logger.error(f"answer webhook: cannot create the call record ({type(error).__name__})")
        clinic = (profile.workspace_id, profile.service_id) if profile.workspace_id else None
        return _xml(_unavailable(runtime, form, call_id, "call creation", error, clinic))
    profile.call_id = call_id
    runtime.remember_profile(profile)
    # Render the greeting while the phone rings (kept on disk for whichever worker
    # process the stream reaches).
    runtime.greetings.warm(
        runtime.plan.tts_identity(runtime.settings, profile.voice), profile.greeting,
        PHONE_SAMPLE_RATE, profile.voice.speed,
    )
    return _xml(stream_twiml(media_stream_url(request, runtime.settings), call_id))


def _unavailable(runtime: AppRuntime, form, call_id: str, stage: str, error: Exception,
                 clinic: tuple[str | None, str | None] | None = None) -> str:
    """The database cannot answer: the caller hears that we have a technical problem, and
    the call goes on record through the writer (spooled until the database is back), in
    the dialled clinic's workspace when it is known."""
    workspace_id, service_id = clinic or runtime.known_clinic(form.get("To"))
    _keep_on_record(runtime, form, call_id, CompletionReason.DATABASE_UNAVAILABLE,
                    workspace_id, service_id, stage=stage, error=type(error).__name__)
    return unavailable_twiml()


def _not_in_service(runtime: AppRuntime, form, call_id: str) -> str:
    """No clinic owns the dialled number and no rule gives it one: the caller hears that
    the number is not in service, and the call is kept without a workspace (no clinic's
    records are looked at for it)."""
    logger.warning(f"call to {mask_phone(form.get('To'))}: number not in service, turned away")
    fallback = runtime.settings.telephony.unknown_number_fallback is not None
    _keep_on_record(runtime, form, call_id, CompletionReason.NUMBER_NOT_IN_SERVICE, None, None,
                    fallback_configured=fallback)
    return not_in_service_twiml()


def _keep_on_record(runtime: AppRuntime, form, call_id: str, reason: CompletionReason,
                    workspace_id: str | None, service_id: str | None, **event_data) -> None:
    """A turned-away call's closed row and its event (`reason`), through the record writer:
    written at once when the database answers, else spooled and replayed; never waited for."""
    runtime.writer.submit(TurnedAwayCall(
        call_id=call_id, call_sid=form.get("CallSid"), completion_reason=reason.value,
        event=reason.value, event_data=event_data, workspace_id=workspace_id,
        service_id=service_id, from_number=form.get("From"), to_number=form.get("To"),
    ))


def _answer_again(request: Request, runtime: AppRuntime, call: dict) -> str:
    """Twilio retried the webhook (e.g. our first answer was slow): same call, same stream."""
    if call.get("connected_at") is None and call.get("ended_at") is None:
        logger.info(f"answer webhook repeated for call {call['id']}; answering it again")
        return stream_twiml(media_stream_url(request, runtime.settings), str(call["id"]))
    logger.warning(f"answer webhook for call {call['id']}, which already streamed; refusing")
    return unavailable_twiml()


async def _dialled_clinic(runtime: AppRuntime, to_number: str | None,
                          timeout_s: float) -> tuple[str | None, str | None]:
    """The clinic (workspace, service) a call dialled, as an answered call would reach it
    (`AppRuntime.dialled_clinic`); the one that number last reached when the lookup fails
    or outlasts `timeout_s`; (None, None) for a number not in service (the call is then
    kept without a clinic)."""
    try:
        found = await runtime.db.bounded(runtime.dialled_clinic(to_number),
                                         what="dialled clinic", timeout=timeout_s)
    except Exception as error:  # noqa: BLE001 - the call is still kept
        logger.warning(f"busy call: dialled clinic not looked up ({type(error).__name__})")
        return runtime.known_clinic(to_number)
    return found.ids


async def _turn_away_busy(runtime: AppRuntime, form, call_id: str, budget: Budget) -> str:
    """At capacity, or draining for a shutdown: the caller hears that the lines are busy,
    and the call is on record in the dialled clinic's workspace, so the clinic sees the
    callers it missed; its event says whether the process was draining. Only the clinic
    lookup waits on the database, within what is left of the webhook's `budget`."""
    in_hand, draining = runtime.calls_in_hand(), runtime.drain.draining
    why = "draining" if draining else f"at capacity ({in_hand} calls)"
    logger.warning(f"{why}: telling the caller the lines are busy")
    workspace_id, service_id = await _dialled_clinic(runtime, form.get("To"), budget.left())
    _keep_on_record(runtime, form, call_id, CompletionReason.AT_CAPACITY, workspace_id,
                    service_id, calls_in_hand=in_hand, limit=runtime.call_capacity,
                    draining=draining)
    return busy_twiml()


@router.post("/status")
async def status_callback(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    call_sid, call_status = form.get("CallSid"), form.get("CallStatus", "")
    try:
        known = await runtime.db.bounded(
            record_status(runtime.db.pool, call_sid, call_status, form), what="call status")
    except Exception as error:
        logger.error(f"status callback not recorded ({type(error).__name__})")
        return Response(status_code=503)
    if not known:
        logger.info(f"status callback for an unknown call ({loggable(call_status)})")
    return Response(status_code=204)


async def record_status(pool, call_sid: str | None, call_status: str, form) -> bool:
    """Store Twilio's report on the call (closing one that never connected); False when
    the call is not ours."""
    call = await repo.find_call_by_sid(pool, call_sid)
    if call is None:
        return False
    fields: dict = {"twilio_status": call_status}
    if form.get("CallDuration", "").isdigit():
        fields["twilio_duration_s"] = int(form["CallDuration"])
    never_connected = call.get("connected_at") is None and call.get("ended_at") is None
    if call_status in TERMINAL_STATUSES and never_connected:
        fields.update(
            status="completed", ended_at=datetime.now(UTC),
            completion_reason=f"twilio_{call_status.replace('-', '_')}",
        )
    await repo.update_call(pool, call["id"], **fields)
    return True
