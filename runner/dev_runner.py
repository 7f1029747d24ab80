"""Pipecat development runner sessions: the same pipeline in a browser, a Daily room or Twilio.

`python bot.py -t webrtc` opens Pipecat's local browser client; `-t daily` joins a
Daily test room (DAILY_API_KEY); `-t twilio -x HOST` serves the runner's own TwiML;
the runner with no `-t` accepts the `pipecat eval` harness on `/ws` (text).
Each session gets a call record like a production call.
"""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.runner.types import RunnerArguments, WebSocketRunnerArguments
from pipecat.runner.utils import create_transport, parse_telephony_websocket
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport

from call.call_session import SessionMode
from config import get_settings
from db import repositories as repo
from processors.voice.greeting_player_processor import PrerenderedSpeech
from runner.call_runner import close_failed_call, end_on_disconnect, run_call
from runner.call_setup import build_call, new_session
from runner.job_kinds import job_kinds
from runner.runtime import AppRuntime
from services.twilio import PHONE_SAMPLE_RATE
from services.twilio.serializer import SafeTwilioFrameSerializer

BROWSER_SAMPLE_RATE = 16000

_runtime: AppRuntime | None = None
_runtime_lock = asyncio.Lock()


async def shared_runtime() -> AppRuntime:
    """One runtime per runner process, started by the first session."""
    global _runtime
    async with _runtime_lock:
        if _runtime is None:
            from lib.log_privacy import mask_record

            logger.configure(patcher=mask_record)  # the runner's logs are PHI-safe too
            _runtime = await AppRuntime.start(get_settings())
            if _runtime.settings.server.job_worker_enabled:
                _runtime.start_jobs(job_kinds(_runtime))
        return _runtime


def _transport_params() -> dict:
    from pipecat.evals.transport import EvalTransportParams

    def daily():
        from pipecat.transports.daily.transport import DailyParams

        return DailyParams(audio_in_enabled=True, audio_out_enabled=True)

    return {
        "webrtc": lambda: TransportParams(audio_in_enabled=True, audio_out_enabled=True),
        "daily": daily,
        "eval": lambda: EvalTransportParams(audio_in_enabled=False, audio_out_enabled=False),
    }


async def run_dev_session(runner_args: RunnerArguments) -> None:
    runtime = await shared_runtime()
    settings = runtime.settings
    transport_type = None
    if isinstance(runner_args, WebSocketRunnerArguments):
        # Telephony or eval: the handshake is parsed once and cached on the socket.
        transport_type, call_data = await parse_telephony_websocket(runner_args.websocket)
        runner_args.transport_type, runner_args.call_data = transport_type, call_data
    is_twilio = transport_type == "twilio"
    if is_twilio:
        mode = SessionMode.PHONE
    else:
        transport = await create_transport(runner_args, _transport_params())
        mode = SessionMode.TEXT if transport_type == "eval" else SessionMode.WEBRTC
    call_data = getattr(runner_args, "call_data", None)

    profile = await runtime.resolve_profile("", None)
    direction = {SessionMode.PHONE: "inbound", SessionMode.TEXT: "eval"}.get(mode, "webrtc")
    profile.call_id = await repo.create_call(
        runtime.db.pool, workspace_id=profile.workspace_id, service_id=profile.service_id,
        call_sid=getattr(call_data, "call_id", None) if is_twilio else None,
        direction=direction, from_number=None, to_number=None, status="ringing",
        owner_instance=runtime.identity.instance_id,
    )
    session = new_session(runtime, profile, mode)
    logger.info(f"dev runner: {mode.value} session, call {session.call_id}")

    rate = PHONE_SAMPLE_RATE if mode is SessionMode.PHONE else BROWSER_SAMPLE_RATE
    if is_twilio:
        serializer = SafeTwilioFrameSerializer(
            runner_args.call_data.stream_id,
            params=TwilioFrameSerializer.InputParams(auto_hang_up=False),
            session=session,
            max_message_bytes=settings.telephony.ws_max_message_bytes,
            max_bad=settings.telephony.ws_max_bad_messages,
        )
        transport = FastAPIWebsocketTransport(
            runner_args.websocket,
            FastAPIWebsocketParams(
                audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
                serializer=serializer,
            ),
        )
    greeting = None
    if mode is SessionMode.TEXT:
        greeting = PrerenderedSpeech(text=profile.greeting, sample_rate=rate, audio=b"")
    try:
        call_pipeline = build_call(runtime, transport, session, profile, greeting=greeting,
                                   sample_rate=rate)
    except Exception as error:
        await close_failed_call(runtime, session, error)
        raise
    end_on_disconnect(transport, session, call_pipeline)
    await run_call(call_pipeline, session, runtime)
