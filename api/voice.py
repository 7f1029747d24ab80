"""Twilio voice webhooks: answer a call with a media stream, record status callbacks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request, Response
from loguru import logger
from twilio.twiml.voice_response import Connect, Stream, VoiceResponse

from bot import PHONE_SAMPLE_RATE
from db import repositories as repo
from api.deps import get_runtime
from api.twilio_auth import media_stream_url, verified_form
from services.redaction import mask_phone
from services.runtime import AppRuntime

router = APIRouter(prefix="/voice", tags=["voice"])

DB_TIMEOUT_S = 2.0
TERMINAL_STATUSES = {"completed", "busy", "failed", "no-answer", "canceled"}
UNAVAILABLE_MESSAGE = (
    "We're sorry, our scheduling line is having a technical problem. Please call again shortly."
)


def stream_twiml(stream_url: str, call_id: str) -> str:
    """`<Connect><Stream>` with our call id as a custom parameter."""
    response = VoiceResponse()
    connect = Connect()
    stream = Stream(url=stream_url)
    stream.parameter(name="call_id", value=call_id)
    connect.append(stream)
    response.append(connect)
    return str(response)


def unavailable_twiml() -> str:
    """Never silence: if we cannot take the call, say so before hanging up."""
    response = VoiceResponse()
    response.say(UNAVAILABLE_MESSAGE)
    response.hangup()
    return str(response)


@router.post("/answer")
async def answer(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    call_sid, to_number = form.get("CallSid"), form.get("To")
    logger.info(f"incoming call to {mask_phone(to_number)} from {mask_phone(form.get('From'))}")
    try:
        profile = await runtime.resolve_profile("", to_number)
        call_id = await asyncio.wait_for(
            repo.create_call(
                runtime.db.pool, workspace_id=profile.workspace_id, service_id=profile.service_id,
                call_sid=call_sid, direction="inbound", from_number=form.get("From"),
                to_number=to_number, status="ringing",
                config_snapshot=profile.snapshot(runtime.plan),
            ),
            DB_TIMEOUT_S,
        )
    except Exception as error:
        logger.error(f"answer webhook: cannot create the call record ({type(error).__name__})")
        return Response(unavailable_twiml(), media_type="application/xml")
    profile.call_id = call_id
    runtime.remember_profile(profile)
    # Render the greeting while the phone rings.
    runtime.greetings.warm(
        runtime.plan.tts_identity(runtime.settings, profile.voice), profile.greeting,
        PHONE_SAMPLE_RATE, profile.voice.speed,
    )
    twiml = stream_twiml(media_stream_url(request, runtime.settings), call_id)
    return Response(twiml, media_type="application/xml")


@router.post("/status")
async def status_callback(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    call_sid, call_status = form.get("CallSid"), form.get("CallStatus", "")
    try:
        call = await asyncio.wait_for(repo.find_call_by_sid(runtime.db.pool, call_sid), DB_TIMEOUT_S)
        if call is None:
            logger.info(f"status callback for an unknown call ({call_status})")
            return Response(status_code=204)
        fields: dict = {"twilio_status": call_status}
        if form.get("CallDuration", "").isdigit():
            fields["twilio_duration_s"] = int(form["CallDuration"])
        never_connected = call.get("connected_at") is None and call.get("ended_at") is None
        if call_status in TERMINAL_STATUSES and never_connected:
            fields.update(
                status="completed", ended_at=datetime.now(UTC),
                completion_reason=f"twilio_{call_status.replace('-', '_')}",
            )
        await repo.update_call(runtime.db.pool, call["id"], **fields)
    except Exception as error:
        logger.error(f"status callback not recorded ({type(error).__name__})")
        return Response(status_code=503)
    return Response(status_code=204)
