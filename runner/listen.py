"""`WS /ws/listen`: a party's audio while a warm hand-off is under way, into the call's
record. Twilio forks each leg in the conference here (`<Start><Stream>`, runner/handoff.py)
with the call and the party (`caller` or `operator`); their words become turns with that
speaker role, so the record keeps all three parties: the agent's before the hand-off,
the caller's and the person's after it.

Receive only: nothing is ever said on this stream. A fork for a call with no hand-off
under way, or for an unknown party, is closed at once.
"""

from __future__ import annotations

from fastapi import WebSocket
from loguru import logger
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from pipecat.workers.runner import WorkerRunner

from db import handoffs
from pipeline.providers import build_stt
from processors.call_control.party_turns_processor import (
    PARTIES,
    PartyTranscript,
    PartyTurnsProcessor,
)
from runner.call_runner import close_socket
from runner.runtime import AppRuntime
from services.turn_models import SharedSileroVADAnalyzer
from services.twilio import PHONE_SAMPLE_RATE
from services.twilio.serializer import read_stream_start


async def serve_listen_stream(websocket: WebSocket, runtime: AppRuntime) -> None:
    await websocket.accept()
    telephony = runtime.settings.telephony
    start = await read_stream_start(
        websocket, first=None, timeout_s=telephony.start_message_timeout_s,
        max_bytes=telephony.ws_max_message_bytes, max_bad=telephony.ws_max_bad_messages)
    if start is None:
        await close_socket(websocket, "no valid start message")
        return
    call_id = start.custom_parameters.get("call_id") or ""
    party = start.custom_parameters.get("party") or ""
    handoff = None
    if party in PARTIES:
        try:
            handoff = await runtime.db.bounded(handoffs.live_for(runtime.db.pool, call_id),
                                               what="hand-off lookup")
        except Exception as error:  # noqa: BLE001 - the call goes on; its words are lost
            logger.warning(f"listen stream: hand-off lookup failed ({type(error).__name__})")
    if handoff is None:
        logger.warning("listen stream: no hand-off under way for this fork; closing")
        await close_socket(websocket, "no hand-off under way")
        return
    transcript = PartyTranscript(call_id, party, runtime.writer, handoff.seq_base,
                                 handoff.started_at)
    await _transcribe(websocket, runtime, start.stream_sid, transcript)


async def _transcribe(websocket: WebSocket, runtime: AppRuntime, stream_sid: str,
                      transcript: PartyTranscript) -> None:
    transport = FastAPIWebsocketTransport(websocket, FastAPIWebsocketParams(
        audio_in_enabled=True, audio_out_enabled=False, add_wav_header=False,
        serializer=TwilioFrameSerializer(
            stream_sid, params=TwilioFrameSerializer.InputParams(auto_hang_up=False)),
        session_timeout=None))
    worker = PipelineWorker(
        Pipeline([
            transport.input(),
            VADProcessor(vad_analyzer=SharedSileroVADAnalyzer(
                params=VADParams(confidence=0.7, start_secs=0.2, stop_secs=0.4))),
            build_stt(runtime.plan, runtime.settings, keyterms=[]),
            PartyTurnsProcessor(transcript),
        ]),
        params=PipelineParams(audio_in_sample_rate=PHONE_SAMPLE_RATE))

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport, _websocket) -> None:
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
    try:
        await runner.add_workers(worker)
        await runner.run()
    except Exception as error:  # noqa: BLE001 - one party's transcript, never the call
        logger.warning(f"listen stream: transcription stopped ({type(error).__name__})")
