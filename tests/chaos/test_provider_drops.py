"""Chaos: whole phone calls whose speech providers fail under them.

Each call runs the production pipeline (`build_call_pipeline` with Deepgram and
ElevenLabs chosen by their keys) over an in-memory phone line through `run_call`, its
record written to the embedded database by the real writer. The caller speaks (eSpeak NG
audio at real-time pace, heard by Silero and smart-turn), Deepgram and ElevenLabs are
the protocol fakes with faults injected: streams dropped mid-turn and mid-sentence, then
(second call) both providers gone for good.

Every call asserts: (a) agent audio reached the caller within `ANSWER_BOUND_S` of each
turn's end and no reply stalled mid-way beyond `GAP_BOUND_S`, (b) no record was lost:
the call row is closed with a reason, every caller turn and the fault events are in the
database.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from itertools import pairwise
from types import SimpleNamespace

import pytest
from pipecat.frames.frames import CancelWorkerFrame

from bench.harness import FRAME_MS, MemoryTransport, trim_trailing_silence
from call.call_session import CallLog, CallSession, CompletionReason, SessionMode
from call.identity import CallIdentity
from config import Settings
from db import repositories as repo
from db.call_backs import CallBacks, Caller
from db.promised_calls import Callee
from db.writer import CallRecordWriter
from pipeline.call_deps import CallDeps
from pipeline.factory import build_call_pipeline
from pipeline.providers import ProviderPlan
from runner.call_runner import run_call
from services.espeak.engine import synthesize_pcm
from services.turn_models import load_turn_models
from tests.fakes import CallRuntime
from tests.voice_fakes import (
    FakeDeepgramListen,
    FakeElevenLabsStream,
    ListenFault,
    StreamFault,
    serve_deepgram_live,
    serve_elevenlabs,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

RATE = 8000
ANSWER_BOUND_S = 5.0  # the caller's turn ends → the agent's first audio reaches them
GAP_BOUND_S = 2.0  # longest pause inside one reply
CHANGE = "I need to change my appointment"
CALLER = "+15550100297"
YES = "yes please"


@pytest.fixture
async def providers():
    async with serve_deepgram_live(FakeDeepgramListen(transcripts=[CHANGE, YES])) as deepgram, \
            serve_elevenlabs(FakeElevenLabsStream(ms_per_char=30)) as elevenlabs:
        yield deepgram, elevenlabs


@pytest.fixture
async def phone_call(db, pg_dsn, tmp_path, providers):
    """A call row, its session recording through the real writer, and the pipeline."""
    await asyncio.to_thread(load_turn_models)  # as AppRuntime.start does
    deepgram, elevenlabs = providers
    settings = Settings(
        _env_file=None, data_dir=tmp_path, database_url=pg_dsn, goodbye_delay_s=0.3,
        deepgram_api_key="dg-test-key", deepgram_base_url=deepgram.base_url,
        elevenlabs_api_key="el-test-key", elevenlabs_url=elevenlabs.url,
    )
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace["id"], service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="in_progress",
    )
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    session = CallSession(identity=CallIdentity(call_id), mode=SessionMode.PHONE,
                          log=CallLog(call_id, writer), clinic_name="Riverside Clinic")
    transport = MemoryTransport(RATE)
    plan = ProviderPlan.from_settings(settings)
    assert (plan.stt.provider, plan.tts.provider) == ("deepgram", "elevenlabs")
    caller = Caller(workspace_id=workspace["id"], call_id=call_id, caller_number=CALLER,
                    callee=Callee(service_id=None))  # a yes to the call back writes its task
    call = build_call_pipeline(transport, session, CallDeps(
        settings=settings, plan=plan, call_backs=CallBacks(db.pool, lambda: caller)))
    running = asyncio.create_task(run_call(call, session, CallRuntime(settings, writer)))
    await asyncio.sleep(0.5)
    line = PhoneLine(transport)
    try:
        yield SimpleNamespace(call_id=call_id, session=session, transport=transport, line=line,
                              running=running, deepgram=deepgram, elevenlabs=elevenlabs)
    finally:
        await line.close()
        if not running.done():
            await call.worker.cancel()
            await asyncio.wait_for(running, 20)
        await writer.close(5.0)


class PhoneLine:
    """The caller's side of the line: 20 ms frames at real-time pace, always flowing
    (silence between the caller's lines, as a phone line sends)."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        step = RATE * 2 * FRAME_MS // 1000
        silence = bytes(step)
        pace = time.perf_counter()
        while True:
            chunk = silence if self._queue.empty() else self._queue.get_nowait()
            await self.transport.input().feed(chunk, RATE)
            pace += FRAME_MS / 1000
            await asyncio.sleep(max(0.0, pace - time.perf_counter()))

    async def say(self, pcm: bytes) -> float:
        """Queue the words; returns when their last frame has gone down the line."""
        step = RATE * 2 * FRAME_MS // 1000
        frames = [pcm[i:i + step].ljust(step, b"\x00") for i in range(0, len(pcm), step)]
        for frame in frames:
            self._queue.put_nowait(frame)
        while not self._queue.empty():
            await asyncio.sleep(FRAME_MS / 1000)
        return time.perf_counter()

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def says(phone, line: str, *, listen_s: float | None = None) -> SimpleNamespace:
    """The caller says `line` and listens to the answer (to its end, or `listen_s`): how
    long the agent took to be heard after the turn ended, and the longest pause in it."""
    pcm = trim_trailing_silence(await synthesize_pcm(line, RATE), RATE)
    ended = await phone.line.say(pcm)
    output = phone.transport.output()
    while (first := output.first_audio_after(ended)) is None:
        assert time.perf_counter() - ended < ANSWER_BOUND_S, (
            f"the caller heard nothing for {ANSWER_BOUND_S} s after {line!r}")
        await asyncio.sleep(0.05)
    if listen_s is None:
        await quiet(phone.transport)
    else:
        await asyncio.sleep(listen_s)
    played = [t for t in output.audio_times if t >= first]
    pauses = [b - a for a, b in pairwise(played)]
    return SimpleNamespace(wait_s=first - ended, longest_pause_s=max(pauses, default=0.0))


async def quiet(transport: MemoryTransport, quiet_s: float = 1.0, limit_s: float = 30.0) -> None:
    """Until the agent has been silent for `quiet_s` (its answer finished playing)."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        times = transport.output().audio_times
        if times and time.perf_counter() - times[-1] >= quiet_s:
            return
        await asyncio.sleep(0.1)


def heard_in_time(*answers: SimpleNamespace) -> bool:
    return all(a.wait_s < ANSWER_BOUND_S and a.longest_pause_s < GAP_BOUND_S for a in answers)


async def closed_record(db, call_id: str) -> SimpleNamespace:
    call = await db.pool.fetchrow(
        "SELECT status, completion_reason, ended_at FROM calls WHERE id = $1::uuid", call_id)
    events = [r["type"] for r in await db.pool.fetch(
        "SELECT type FROM call_events WHERE call_id = $1::uuid ORDER BY seq", call_id)]
    turns = await db.pool.fetch(
        "SELECT speaker_role, text FROM turns WHERE call_id = $1::uuid ORDER BY seq", call_id)
    return SimpleNamespace(call=call, events=events, turns=turns,
                           caller=[t["text"] for t in turns if t["speaker_role"] == "caller"])


async def test_streams_dropped_mid_turn_and_mid_sentence_cost_the_caller_nothing(db, phone_call):
    phone = phone_call
    phone.deepgram.fail_next(ListenFault(drop_after_audio_s=0.6))  # mid-way through turn 1
    phone.elevenlabs.fail_next(StreamFault(drop_after_words=3))  # mid-way through reply 1

    offer = await says(phone, CHANGE)  # the callback offer, cut off and finished
    goodbye = await says(phone, YES)  # confirmed: the agent says goodbye and hangs up
    await asyncio.wait_for(phone.running, 20)

    # (a) never silent beyond the bounds
    assert heard_in_time(offer, goodbye), (offer, goodbye)
    assert phone.deepgram.dropped == 1 and phone.elevenlabs.dropped == 1
    # (b) nothing lost: both caller turns, the faults, the end
    record = await closed_record(db, phone.call_id)
    assert record.call["status"] == "completed" and record.call["ended_at"] is not None
    assert record.call["completion_reason"] == CompletionReason.AGENT_HANGUP.value
    assert record.caller == [CHANGE, YES]
    for event in ("stt_reconnect", "stt_recovered", "tts_reconnect", "tts_resumed",
                  "call_ended"):
        assert event in record.events, f"{event} missing from {record.events}"
    assert len([t for t in record.turns if t["speaker_role"] == "agent"]) >= 2


async def test_both_providers_gone_for_good_the_call_carries_on_offline(db, phone_call):
    phone = phone_call
    phone.deepgram.fail_next(ListenFault(drop_after_audio_s=0.6))
    phone.deepgram.faults += [ListenFault(refuse=True)] * 50  # Deepgram does not come back
    phone.elevenlabs.fail_next(StreamFault(drop_after_words=2))
    phone.elevenlabs.faults += [StreamFault(refuse=True)] * 50  # nor does ElevenLabs

    # Turn 1 is lost with Deepgram: the caller is told and asked to say it again.
    apology = await says(phone, CHANGE)
    # Heard offline (PocketSphinx), answered in the local voice (eSpeak NG).
    offline = await says(phone, "I would like to book an appointment", listen_s=2.0)
    phone.session.caller_hung_up = True
    await phone.transport.input().push_frame(
        CancelWorkerFrame(reason=CompletionReason.CALLER_HANGUP.value))
    await asyncio.wait_for(phone.running, 20)

    assert heard_in_time(apology, offline), (apology, offline)
    record = await closed_record(db, phone.call_id)
    assert record.call["status"] == "completed"
    assert record.call["completion_reason"] == CompletionReason.CALLER_HANGUP.value
    for event in ("stt_reconnect", "stt_failed", "stt_fallback", "tts_reconnect", "tts_failed",
                  "tts_fallback", "call_ended"):
        assert event in record.events, f"{event} missing from {record.events}"
    assert len(record.caller) == 1 and record.caller[0]  # the offline recognizer's words
