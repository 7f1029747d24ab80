"""Runs one call on the shared `/ws` endpoint: a Twilio media stream or an eval text session.

The first message decides which: Pipecat's `eval-connect` means a text session
(the simulator's `--text` mode or `pipecat eval`), anything else is read as a
Twilio stream. Both run the same pipeline (`runner/call_setup.build_call`); both
end in `finish_call`, which closes the call record with a reason whatever
happened, flushes the record writer, and starts the after-call work (write
verification; transcript re-verification when the workspace enables it).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from fastapi import WebSocket
from loguru import logger
from pipecat.evals.fastapi_transport import EvalFastAPIWebsocketTransport
from pipecat.evals.serializer import EvalConnectionFlags, EvalSerializer, parse_eval_connect
from pipecat.evals.transport import EvalTransportParams
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner
from starlette.websockets import WebSocketDisconnect, WebSocketState

from call.call_session import CallSession, CompletionReason, SessionMode
from db import handoffs
from db import repositories as repo
from db.handoffs import Handoff
from lib.prompts import render_prompt
from ops.commands import CallControl
from pipeline.factory import CallPipeline
from processors.voice.greeting_player_processor import PrerenderedSpeech
from runner import transcript_verification as tv
from runner.call_setup import build_call, new_session
from runner.drain import end_call_on_drain
from runner.handoff import RESUME_AT, hand_off_for
from runner.outbound.answer import profile_for_call
from runner.post_call import SEQ_ROOM
from runner.runtime import AppRuntime, CallProfile
from services.twilio import PHONE_SAMPLE_RATE
from services.twilio.serializer import (
    SafeTwilioFrameSerializer,
    StreamStart,
    play_twiml_on_call,
    read_stream_start,
    twilio_credentials,
)
from services.twilio.twiml import unavailable_twiml

# The pre-rendered greeting must be ready almost at once or we synthesize live.
GREETING_WAIT_S = 0.05
FLUSH_TIMEOUT_S = 10.0
POLICY_VIOLATION = 1008
UNSUPPORTED_DATA = 1003


async def serve_media_stream(websocket: WebSocket, runtime: AppRuntime, *,
                             signed: bool = True) -> None:
    """Entry point of `WS /ws`. An upgrade without Twilio's signature (`signed` False,
    allowed only for development eval sessions) may open a text session and nothing else."""
    await websocket.accept()
    first = await _first_message(websocket, runtime.settings.telephony.start_message_timeout_s)
    if first is None:
        return
    flags = _eval_flags(first)
    if flags is not None:
        await _serve_text_session(websocket, runtime, flags)
    elif not signed:
        logger.warning("media stream: an unsigned upgrade may open text sessions only; closing")
        await close_socket(websocket, "unsigned media stream")
    else:
        await _serve_phone_call(websocket, runtime, first)


async def _first_message(websocket: WebSocket, timeout_s: float) -> str | None:
    """The stream's first text message; None once the socket is closed. A peer that hangs
    up, stays silent or sends binary costs one log line (no traceback): it is noise any
    client can make, not a fault of ours. Binary is closed 1003 (unsupported data)."""
    try:
        message = await asyncio.wait_for(websocket.receive(), timeout_s)
    except TimeoutError:
        logger.warning(f"media stream: no first message within {timeout_s:g} s; closing")
        await close_socket(websocket, "no first message")
        return None
    except (WebSocketDisconnect, RuntimeError):
        message = {"type": "websocket.disconnect"}
    if message["type"] == "websocket.disconnect":
        logger.info("media stream: closed by the peer before its first message")
        return None
    if message.get("text") is None:
        logger.warning("media stream: binary first message; closing (unsupported data)")
        await close_socket(websocket, "text messages only", code=UNSUPPORTED_DATA)
        return None
    return message["text"]


def _eval_flags(message: str) -> EvalConnectionFlags | None:
    try:
        return parse_eval_connect(json.loads(message))
    except (ValueError, TypeError):
        return None


async def close_socket(websocket: WebSocket, reason: str, code: int = POLICY_VIOLATION) -> None:
    if WebSocketState.DISCONNECTED in (websocket.client_state, websocket.application_state):
        return  # the peer left, or we already closed it
    try:
        await websocket.close(code=code, reason=reason)
    except (RuntimeError, WebSocketDisconnect):
        pass  # closed by the peer meanwhile


class CallLookupFailed(Exception):
    """The database could not say whether the stream's call exists."""


async def _known_call(runtime: AppRuntime, call_id: str | None) -> dict | None:
    """The call created by the signed answer webhook that this stream claims to be (claimed)."""
    if not call_id:
        return None
    try:
        return await runtime.db.bounded(
            repo.claim_call_for_stream(runtime.db.pool, call_id, runtime.identity.instance_id),
            what="stream call lookup")
    except Exception as error:
        logger.warning(f"media stream: call lookup failed ({type(error).__name__})")
        raise CallLookupFailed from error


async def _serve_phone_call(websocket: WebSocket, runtime: AppRuntime, first: str) -> None:
    telephony = runtime.settings.telephony
    start = await read_stream_start(
        websocket, first=first, timeout_s=telephony.start_message_timeout_s,
        max_bytes=telephony.ws_max_message_bytes, max_bad=telephony.ws_max_bad_messages,
    )
    if start is None:
        await close_socket(websocket, "no valid start message")
        return
    call_id = start.custom_parameters.get("call_id")
    resumed: Handoff | None = None
    try:
        if start.custom_parameters.get("resume"):
            call, resumed = await _taken_back(runtime, call_id)
        else:
            call = await _known_call(runtime, call_id)
    except CallLookupFailed:
        await tell_caller_unavailable(runtime, start.call_sid)
        await close_socket(websocket, "database unavailable")
        return
    if call is None:
        logger.warning("media stream: start for an unknown or finished call; closing")
        await close_socket(websocket, "unknown call")
        return
    profile = await _profile_of(runtime, call_id, call)
    first_seq = 1
    if resumed is not None:
        first_seq = await runtime.db.bounded(repo.last_record_seq(runtime.db.pool, call_id),
                                             what="call record") + SEQ_ROOM + 1
        profile = replace(profile, resume=RESUME_AT, greeting=render_prompt(
            "handoff/not_reached.txt", place=resumed.destination))
    session = new_session(
        runtime, profile, SessionMode.PHONE, call_sid=start.call_sid,
        caller_number=_other_party(call), first_seq=first_seq,
    )
    if resumed is not None:
        session.log.event("handoff_taken_back", handoff_id=resumed.id,
                          outcome=resumed.outcome)
    for kind in start.bad_messages:
        session.log.event("bad_input", kind=kind, where="before start")

    try:
        call_pipeline = await _phone_pipeline(websocket, runtime, session, profile, start)
    except Exception as error:
        await _abort_call(websocket, runtime, session, error, call_sid=start.call_sid)
        return
    await run_call(call_pipeline, session, runtime)


async def _taken_back(runtime: AppRuntime, call_id: str | None
                      ) -> tuple[dict | None, Handoff | None]:
    """The call coming back to the agent after a hand-off that reached nobody, its
    record opened again (once); (None, None) when it is not such a call."""
    if not call_id:
        return None, None
    try:
        taken = await runtime.db.bounded(
            handoffs.resume_call(runtime.db.pool, call_id, runtime.identity.instance_id),
            what="call taken back")
    except Exception as error:
        logger.warning(f"media stream: call lookup failed ({type(error).__name__})")
        raise CallLookupFailed from error
    return taken if taken is not None else (None, None)


async def _profile_of(runtime: AppRuntime, call_id: str, call: dict) -> CallProfile:
    """The profile resolved at the answer: this process's own, else the set-up the answer
    stored with the call (another worker process, or pod, answered it); else resolved
    again: an outbound call's from its task, any other by the number dialled."""
    profile = runtime.take_profile(call_id)
    if profile is None and call.get("stream_setup") is not None:
        try:
            profile = await runtime.db.bounded(
                runtime.restore_profile(call_id, call["stream_setup"]), what="call setup")
        except Exception as error:  # noqa: BLE001 - resolved again below
            logger.warning(f"call {call_id}: stored setup not restored ({type(error).__name__})")
    if profile is None and call.get("direction") == "outbound":
        try:
            profile = await runtime.db.bounded(profile_for_call(runtime, call),
                                               what="outbound call profile")
        except Exception as error:  # noqa: BLE001 - the clinic's own profile instead
            logger.warning(f"call {call_id}: outbound profile not rebuilt "
                           f"({type(error).__name__})")
    clinic_number = call.get("from_number" if call.get("direction") == "outbound" else "to_number")
    return profile or await runtime.resolve_profile(call_id, clinic_number)


def _other_party(call: dict) -> str | None:
    """The number of the person on the line: who called, or whom the clinic called."""
    return call.get("to_number") if call.get("direction") == "outbound" else call.get(
        "from_number")


async def tell_caller_unavailable(runtime: AppRuntime, call_sid: str | None) -> dict | None:
    """We cannot run this call: have Twilio say so and hang up, rather than leave silence.

    Needs the account's REST credentials; without them the caller hears silence
    until Twilio notices the closed stream, and the log says so.
    """
    credentials = twilio_credentials(runtime.settings, call_sid)
    if credentials is None:
        logger.error("cannot tell the caller: no Twilio credentials to speak through")
        return None
    result = await play_twiml_on_call(credentials, call_sid, unavailable_twiml())
    log = logger.info if result["outcome"] == "completed" else logger.error
    log(f"told the caller we are unavailable ({result['outcome']})")
    return result


async def _phone_pipeline(
    websocket: WebSocket, runtime: AppRuntime, session: CallSession, profile: CallProfile,
    start: StreamStart,
) -> CallPipeline:
    settings = runtime.settings
    credentials = twilio_credentials(settings, start.call_sid)
    serializer = SafeTwilioFrameSerializer(
        start.stream_sid,
        call_sid=start.call_sid,
        credentials=credentials,
        params=TwilioFrameSerializer.InputParams(auto_hang_up=credentials is not None),
        session=session,
        max_message_bytes=settings.telephony.ws_max_message_bytes,
        max_bad=settings.telephony.ws_max_bad_messages,
    )
    transport = FastAPIWebsocketTransport(
        websocket,
        FastAPIWebsocketParams(
            audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
            serializer=serializer, session_timeout=None,
        ),
    )
    greeting = await runtime.greetings.get(
        runtime.plan.tts_identity(settings, profile.voice), profile.greeting, PHONE_SAMPLE_RATE,
        timeout_s=GREETING_WAIT_S, speed=profile.voice.speed,
    )
    call_pipeline = build_call(runtime, transport, session, profile, greeting=greeting,
                               sample_rate=PHONE_SAMPLE_RATE)
    engine = call_pipeline.engine
    serializer.hand_off = hand_off_for(runtime.handoffs, session,
                                       engine.session if engine is not None else None,
                                       profile.dialled_number)
    end_on_disconnect(transport, session, call_pipeline)
    return call_pipeline


async def _abort_call(
    websocket: WebSocket, runtime: AppRuntime, session: CallSession, error: Exception,
    call_sid: str | None = None,
) -> None:
    """The pipeline could not be built: tell the caller, close the record and the socket."""
    if session.mode is SessionMode.PHONE:
        told = await tell_caller_unavailable(runtime, call_sid)
        session.log.event("caller_told_unavailable", **(told or {"outcome": "no_credentials"}))
    await close_failed_call(runtime, session, error)
    await close_socket(websocket, "internal error")


async def close_failed_call(runtime: AppRuntime, session: CallSession, error: Exception) -> None:
    """A call whose pipeline could not start still gets a closed record saying why."""
    logger.exception(f"call {session.call_id}: pipeline could not start")
    session.log.event("pipeline_failed", stage="setup", error=type(error).__name__)
    session.log.update_call(
        status="completed", ended_at=datetime.now(UTC),
        completion_reason=CompletionReason.PIPELINE_ERROR.value,
    )
    await runtime.writer.flush(FLUSH_TIMEOUT_S)


async def _serve_text_session(
    websocket: WebSocket, runtime: AppRuntime, flags: EvalConnectionFlags
) -> None:
    call_id = websocket.query_params.get("call_id")
    try:
        call = await _known_call(runtime, call_id)
    except CallLookupFailed:
        await close_socket(websocket, "database unavailable")
        return
    if call is None:
        if call_id or not runtime.settings.server.allow_open_eval_sessions:
            logger.warning("text session: no matching call from /voice/answer; closing")
            await close_socket(websocket, "text sessions need a call created by /voice/answer")
            return
        profile = await runtime.resolve_profile("", None)
        call_id = await repo.create_call(
            runtime.db.pool, workspace_id=profile.workspace_id, service_id=profile.service_id,
            call_sid=None, direction="eval", from_number=None, to_number=None, status="ringing",
            owner_instance=runtime.identity.instance_id,
        )
        profile.call_id = call_id
    else:
        profile = await _profile_of(runtime, call_id, call)
    session = new_session(
        runtime, profile, SessionMode.TEXT, caller_number=_other_party(call or {})
    )
    try:
        params = EvalTransportParams(audio_in_enabled=False, audio_out_enabled=False)
        params.serializer = EvalSerializer()
        transport = EvalFastAPIWebsocketTransport(websocket, params, flags)
        # Text sessions have no audio: the greeting is its words alone.
        greeting = PrerenderedSpeech(text=profile.greeting, sample_rate=PHONE_SAMPLE_RATE, audio=b"")
        call_pipeline = build_call(runtime, transport, session, profile, greeting=greeting,
                                   sample_rate=PHONE_SAMPLE_RATE)
        end_on_disconnect(transport, session, call_pipeline)
    except Exception as error:
        await _abort_call(websocket, runtime, session, error)
        return
    await run_call(call_pipeline, session, runtime)


def end_on_disconnect(transport, session: CallSession, call_pipeline: CallPipeline) -> None:
    """A closed socket ends the call at once."""

    @transport.event_handler("on_client_disconnected")
    async def _on_disconnected(_transport, _websocket) -> None:
        await caller_disconnected(session, call_pipeline)


async def caller_disconnected(session: CallSession, call_pipeline: CallPipeline) -> None:
    """The socket closed under the call: stop it at once (no one is left to hear it)."""
    if not session.caller_hung_up:
        session.end_as(CompletionReason.CALLER_DISCONNECTED)
    await call_pipeline.worker.cancel()


async def run_call(call_pipeline: CallPipeline, session: CallSession, runtime: AppRuntime) -> None:
    """Run the pipeline to its end, whatever ends it, then close the record."""
    session.log.restart_clock()
    session.conversation.restart_clock()
    started = datetime.now(UTC)
    task = asyncio.current_task()
    runtime.call_running(session.call_id, task)
    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    on_drain: asyncio.Task | None = None
    try:
        runtime.ops.call_running(session, call_control(runtime, session, call_pipeline))
        await runner.add_workers(call_pipeline.worker)
        if call_pipeline.initial_frames:
            await call_pipeline.worker.queue_frames(call_pipeline.initial_frames)
        # The server's drain ends the call with a spoken line (runner/drain.py).
        on_drain = asyncio.create_task(
            end_call_on_drain(runtime.drain, session, call_pipeline.worker))
        await runner.run()
    except asyncio.CancelledError:
        session.end_as(CompletionReason.SERVER_SHUTDOWN)
        await call_pipeline.worker.cancel()
    except Exception as error:
        logger.exception(f"call {session.call_id}: pipeline failed")
        session.log.event("pipeline_failed", error=type(error).__name__)
        session.end_as(CompletionReason.PIPELINE_ERROR)
    finally:
        if on_drain is not None:
            on_drain.cancel()
        runtime.call_done(session.call_id)
        runtime.ops.call_finished(session.call_id)
        await finish_call(call_pipeline, session, runtime, started)


def call_control(runtime: AppRuntime, session: CallSession, call_pipeline: CallPipeline
                 ) -> CallControl:
    """How operator commands act on this call: a take-over is put through to
    `HUMAN_TRANSFER_NUMBER` only when Twilio can transfer it."""
    can_transfer = twilio_credentials(runtime.settings, session.call_sid) is not None
    return CallControl(
        session, call_pipeline.worker,
        transfer_number=runtime.settings.telephony.human_transfer_number if can_transfer else None,
    )


def completion_reason(session: CallSession) -> CompletionReason:
    if session.completion_reason is not None:
        return session.completion_reason
    if session.caller_hung_up:
        return CompletionReason.CALLER_HANGUP
    return CompletionReason.CALLER_DISCONNECTED


async def finish_call(
    call_pipeline: CallPipeline, session: CallSession, runtime: AppRuntime, started: datetime
) -> None:
    """Close the call record: open turns, recording, reason, duration; then flush. Then,
    off the call's path, verify what the call wrote and sync what is verified."""
    await call_pipeline.recorder.flush()
    if call_pipeline.extractor is not None:
        await call_pipeline.extractor.finish()
    if call_pipeline.engine is not None:
        # An outbound call that ended before its last state closes its task with what it
        # found (bounded, never raises; nothing for any other call).
        await call_pipeline.engine.finish_outbound()
    recording = call_pipeline.recording
    saved = recording is not None and await recording.save()
    reason = completion_reason(session)
    ended = datetime.now(UTC)
    if session.bad_messages:
        session.log.event("bad_input_total", count=session.bad_messages)
    session.log.event("call_ended", reason=reason.value,
                      repeated_questions=session.conversation.tracker.repeated_questions)
    if call_pipeline.emotion is not None:
        session.log.update_call(emotional_summary=call_pipeline.emotion.summary_record())
    patient_id = (call_pipeline.engine.session.identified_patient_id()
                  if call_pipeline.engine is not None else None)
    if patient_id is not None:
        session.log.update_call(patient_id=patient_id)
    session.log.update_call(
        status="completed", ended_at=ended, completion_reason=reason.value,
        duration_s=round((ended - started).total_seconds(), 3),
    )
    logger.info(f"call {session.call_id}: ended ({reason.value})")
    flushed = await runtime.writer.flush(FLUSH_TIMEOUT_S)
    if session.workspace_id is not None:
        runtime.verify_soon(session.call_id, session.log)
        if session.voice.post_call_analysis_enabled:
            runtime.analyse_soon(session.call_id, session.log)
        if saved and recording is not None:
            verify_transcript_soon(runtime, session, recording.path, flushed=flushed)


def verify_transcript_soon(runtime: AppRuntime, session: CallSession, recording: Path, *,
                           flushed: bool) -> asyncio.Task | None:
    """Re-transcribe a finished call's recording in the background when its workspace's
    voice settings turn `transcript_correction_enabled` on (default off). Scored against
    the caller turns in the database, so only once the record is written (`flushed`)."""
    if not session.voice.transcript_correction_enabled:
        return None
    if not flushed:
        logger.warning(f"call {session.call_id}: transcript not re-verified (its record "
                       "was not written in time)")
        session.log.event("transcript_verification_failed", automatic=True,
                          error="record_not_written")
        return None
    return runtime.in_background(
        tv.verify_after_call(runtime.db.pool, session.log, recording, runtime.settings),
        name=f"transcript-verify-{session.call_id}")
