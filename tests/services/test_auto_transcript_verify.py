"""The automatic transcript re-verification after a recorded call (workspace voice setting
`transcript_correction_enabled`, default off), and the verification decoder's process
stopped with the other worker pools at shutdown."""

from __future__ import annotations

import asyncio
import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru import logger

from call.identity import CallIdentity
from call.voice_settings import VoiceSettings
from config import Settings
from lib.event_loop import BackgroundTasks
from runner import transcript_verification as tv
from runner.call_runner import finish_call
from runner.runtime import stop_worker_pools
from tests.fakes import CollectingWriter, make_session

CALLER_WORDS = "my date of birth is the first of May"


class FakeRecording:
    """A call's stereo recording as finish_call sees it: saved once, at `path`."""

    def __init__(self, path: Path, *, has_audio: bool = True) -> None:
        self.path = path
        self._has_audio = has_audio

    async def save(self) -> bool:
        return self._has_audio


class FakeRecorder:
    async def flush(self) -> None:
        return None


class FakePipeline:
    def __init__(self, recording: FakeRecording | None) -> None:
        self.recorder = FakeRecorder()
        self.extractor = None
        self.emotion = None
        self.engine = None  # static prompt mode: no context graph
        self.recording = recording


class FakeWriter:
    def __init__(self, flushed: bool) -> None:
        self._flushed = flushed

    async def flush(self, timeout: float) -> bool:
        return self._flushed


class FakeRuntime:
    """What finish_call uses of AppRuntime."""

    def __init__(self, *, timeout_s: float = 5.0, flushed: bool = True) -> None:
        self.settings = Settings(_env_file=None, transcript_verify_timeout_s=timeout_s)
        self.db = type("Db", (), {"pool": object()})()
        self.writer = FakeWriter(flushed)
        self.verified_writes: list[str] = []
        self.analysed: list[str] = []
        self.background = BackgroundTasks()
        self.started: list[str] = []

    def verify_soon(self, call_id: str, log=None) -> None:
        self.verified_writes.append(call_id)

    def analyse_soon(self, call_id: str, log=None) -> None:
        self.analysed.append(call_id)

    def in_background(self, work, *, name: str) -> asyncio.Task:
        self.started.append(name)
        return self.background.start(work, name=name)


class FakeVerifier:
    """Stands in for `verify_recording`: records its arguments, answers, fails or hangs."""

    def __init__(self, outcome: str = "ok") -> None:
        self.outcome = outcome
        self.calls: list[tuple] = []

    async def __call__(self, db, call_id, recording, **options) -> tv.VerificationResult:
        self.calls.append((db, call_id, recording, options))
        if self.outcome == "fail":
            raise tv.VerificationError(f"Deepgram could not hear '{CALLER_WORDS}'")
        if self.outcome == "hang":
            await asyncio.sleep(3600)
        return tv.VerificationResult(call_id, "local:pocketsphinx", 0.9, 0.1, 12,
                                     f"caller: {CALLER_WORDS}")


def recorded_session(writer: CollectingWriter, *, enabled: bool):
    session = make_session(writer)
    session.identity = CallIdentity(session.call_id, workspace_id="w1")
    session.voice = VoiceSettings(transcript_correction_enabled=enabled)
    return session


async def finish(runtime: FakeRuntime, session, recording: FakeRecording | None) -> None:
    await finish_call(FakePipeline(recording), session, runtime, datetime.now(UTC))
    await runtime.background.wait()


async def test_the_setting_re_verifies_a_recorded_call_after_it_ends(monkeypatch, tmp_path):
    verifier = FakeVerifier()
    monkeypatch.setattr(tv, "verify_recording", verifier)
    writer, runtime = CollectingWriter(), FakeRuntime(timeout_s=7.5)
    session = recorded_session(writer, enabled=True)

    await finish(runtime, session, FakeRecording(tmp_path / "call-1.wav"))

    assert runtime.started == ["transcript-verify-call-1"]
    assert runtime.verified_writes == ["call-1"]
    [(db, call_id, recording, options)] = verifier.calls
    assert (db, call_id, recording) == (runtime.db.pool, "call-1", tmp_path / "call-1.wav")
    assert options == {"deepgram_api_key": None, "deepgram_base_url": None, "timeout_s": 7.5,
                       "system_keyterms": tuple(runtime.settings.call.system_keyterms)}
    # After the call's end, in the call's record.
    types = [e.type for e in writer.events()]
    assert types.index("call_ended") < types.index("transcript_verified")
    [event] = writer.events("transcript_verified")
    assert event.data == {"automatic": True, "verifier": "local:pocketsphinx",
                          "accuracy": 0.9, "wer": 0.1, "words": 12}


@pytest.mark.parametrize("enabled, recording", [
    (False, "saved"),  # the default: off
    (True, None),      # a text call: nothing recorded
    (True, "silent"),  # no audio at all: no file written
])
async def test_nothing_is_re_verified_when_off_or_without_a_recording(
        monkeypatch, tmp_path, enabled, recording):
    verifier = FakeVerifier()
    monkeypatch.setattr(tv, "verify_recording", verifier)
    writer, runtime = CollectingWriter(), FakeRuntime()
    file = None if recording is None else FakeRecording(tmp_path / "call-1.wav",
                                                         has_audio=recording == "saved")

    await finish(runtime, recorded_session(writer, enabled=enabled), file)

    assert runtime.started == [] and verifier.calls == []
    assert runtime.verified_writes == ["call-1"]  # the write verification still runs
    assert not writer.events("transcript_verified")
    assert not writer.events("transcript_verification_failed")


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_finished_call_is_analysed_when_its_workspace_keeps_analysis_on(
        tmp_path, enabled):
    writer, runtime = CollectingWriter(), FakeRuntime()
    session = recorded_session(writer, enabled=False)
    session.voice = VoiceSettings(post_call_analysis_enabled=enabled)

    await finish(runtime, session, None)

    assert runtime.analysed == (["call-1"] if enabled else [])
    assert VoiceSettings().post_call_analysis_enabled  # on unless a workspace turns it off


def test_the_setting_defaults_to_off():
    assert VoiceSettings().transcript_correction_enabled is False


@pytest.mark.parametrize("outcome, error", [("fail", "VerificationError"),
                                            ("hang", "TimeoutError")])
async def test_a_failure_or_timeout_is_an_event_and_a_log_line_without_what_was_said(
        monkeypatch, tmp_path, outcome, error):
    monkeypatch.setattr(tv, "verify_recording", FakeVerifier(outcome))
    writer, runtime = CollectingWriter(), FakeRuntime(timeout_s=0.05)
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    try:
        await finish(runtime, recorded_session(writer, enabled=True),
                     FakeRecording(tmp_path / "call-1.wav"))
    finally:
        logger.remove(sink)

    [event] = writer.events("transcript_verification_failed")
    assert event.data == {"automatic": True, "error": error}
    [line] = [line for line in lines if "transcript verification" in line]
    assert f"call call-1: automatic transcript verification failed ({error})" in line
    assert CALLER_WORDS not in "".join(lines)


async def test_an_unwritten_record_is_not_scored(monkeypatch, tmp_path):
    """The real-time side comes from the turns in the database: unwritten, no score."""
    verifier = FakeVerifier()
    monkeypatch.setattr(tv, "verify_recording", verifier)
    writer, runtime = CollectingWriter(), FakeRuntime(flushed=False)

    await finish(runtime, recorded_session(writer, enabled=True),
                 FakeRecording(tmp_path / "call-1.wav"))

    assert verifier.calls == [] and runtime.started == []
    [event] = writer.events("transcript_verification_failed")
    assert event.data == {"automatic": True, "error": "record_not_written"}


@pytest.mark.timeout(120)
async def test_stop_worker_pools_stops_the_verification_decoder():
    before = {p.pid for p in multiprocessing.active_children()}
    decoder = tv.VerificationDecoder.shared()
    assert tv.VerificationDecoder.started() == [decoder]
    await decoder.pool.transcribe(bytes(1600), 8000)  # 0.1 s of silence: spawns the worker
    workers = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert len(workers) == 1 and workers[0].is_alive()

    await asyncio.to_thread(stop_worker_pools)

    assert not workers[0].is_alive()
    assert {p.pid for p in multiprocessing.active_children()} <= before
    # The next verification starts a fresh one.
    await decoder.pool.transcribe(bytes(1600), 8000)
    again = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert len(again) == 1 and again[0].pid != workers[0].pid
    tv.shutdown_local_pool()
    assert not again[0].is_alive()
