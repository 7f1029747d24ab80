"""Twilio's callbacks for warm hand-offs (runner/handoff.py): the person's leg as it rings,
is answered or ends, and the conference as each party joins or leaves. Signed like every
Twilio webhook (403 without a valid signature); a hand-off this service does not know is
acknowledged and ignored.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from loguru import logger

from api.deps import get_runtime
from api.twilio_auth import verified_form
from db import handoffs
from runner.post_call import call_log_after
from runner.runtime import AppRuntime

router = APIRouter(prefix="/voice/handoff", tags=["voice"])


@router.post("/{handoff_id}/operator", status_code=204)
async def operator_leg(handoff_id: str, request: Request,
                       runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    return await _handle(runtime, handoff_id, "operator", form)


@router.post("/{handoff_id}/conference", status_code=204)
async def conference(handoff_id: str, request: Request,
                     runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    return await _handle(runtime, handoff_id, "conference", form)


async def _handle(runtime: AppRuntime, handoff_id: str, kind: str,
                  form: dict[str, str]) -> Response:
    warm = runtime.handoffs
    if warm is None:
        return Response(status_code=204)
    try:
        found = await runtime.db.bounded(handoffs.get(runtime.db.pool, handoff_id),
                                         what="hand-off lookup")
        if found is None:
            return Response(status_code=204)
        log = await call_log_after(runtime.db.pool, runtime.writer, found.call_id)
        if kind == "operator":
            await warm.operator_status(handoff_id, form.get("CallStatus", ""), log)
        else:
            await warm.conference_event(handoff_id, form.get("StatusCallbackEvent", ""),
                                        form.get("CallSid"), log)
    except ValueError:
        return Response(status_code=204)  # not a hand-off id
    except Exception as error:  # noqa: BLE001 - Twilio retries nothing; the record says so
        logger.error(f"hand-off {kind} callback not handled ({type(error).__name__})")
        return Response(status_code=503)
    return Response(status_code=204)
