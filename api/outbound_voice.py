"""Twilio's webhooks for the calls the clinic places (runner/outbound/answer.py says what
each does): the answer once machine detection has decided, and the status callbacks.
Signed like every Twilio webhook (api/twilio_auth.py: 403 without a valid signature)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from loguru import logger

from api.deps import get_runtime
from api.twilio_auth import media_stream_url, verified_form
from api.voice import record_status
from runner.outbound.answer import answer_call, call_status
from runner.runtime import AppRuntime
from services.twilio.twiml import unavailable_twiml

router = APIRouter(prefix="/voice/outbound", tags=["voice"])

# Everything an answer looks up and writes, well inside Twilio's 15 s wait.
ANSWER_BUDGET_S = 5.0


@router.post("/answer")
async def answer(request: Request, attempt: str = "",
                 runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    try:
        twiml = await runtime.db.bounded(
            answer_call(runtime, attempt, form, media_stream_url(request, runtime.settings)),
            what="outbound answer", timeout=ANSWER_BUDGET_S)
    except Exception as error:  # noqa: BLE001 - the callee hears why, never silence
        logger.error(f"outbound answer webhook failed ({type(error).__name__}); the callee "
                     "hears we have a technical problem")
        twiml = unavailable_twiml()
    return Response(twiml, media_type="application/xml")


@router.post("/status")
async def status(request: Request, attempt: str = "",
                 runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    try:
        known = await runtime.db.bounded(_record(runtime, attempt, form),
                                         what="outbound call status")
    except Exception as error:  # noqa: BLE001 - the dispatcher asks Twilio later
        logger.error(f"outbound status callback not recorded ({type(error).__name__})")
        return Response(status_code=503)
    if not known:
        logger.info("status callback for an unknown outbound attempt")
    return Response(status_code=204)


async def _record(runtime: AppRuntime, attempt: str, form: dict[str, str]) -> bool:
    known = await call_status(runtime, attempt, form)
    # The call's record, when the answer created one (closed as an inbound call's is).
    await record_status(runtime.db.pool, form.get("CallSid"), form.get("CallStatus", ""), form)
    return known
