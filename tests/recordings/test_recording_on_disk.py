"""A call's recording reaches the disk as the call goes on, so a process killed mid-call
leaves it salvageable: the next start repairs the header from the data and keeps it."""

from __future__ import annotations

import asyncio
import wave

import numpy as np

from call.recording import StereoRecording, interleave
from call.wav_file import GrowingWav, partial_path, repair, salvage

RATE = 8000
SECOND = RATE * 2  # bytes of mono PCM16


def speech(seconds: float, value: int) -> bytes:
    return np.full(int(seconds * RATE), value, dtype="<i2").tobytes()


async def written_through(recording: StereoRecording) -> None:
    """Until the chunk handed to the worker thread is on disk."""
    while recording._writing is not None:
        await asyncio.sleep(0.01)


def frames_of(path) -> tuple[int, bytes]:
    with wave.open(str(path)) as wav:
        return wav.getnframes(), wav.readframes(wav.getnframes())


async def test_audio_reaches_the_disk_during_the_call_and_a_kill_keeps_it(session, tmp_path):
    recording = StereoRecording(session, tmp_path, RATE, flush_every_s=1.0)
    caller, agent = speech(2.5, 100), speech(0.8, -200)

    recording.add_caller_audio(caller[: SECOND], RATE)
    recording.add_agent_audio(agent, RATE)  # the agent speaks at the 1 s mark
    await written_through(recording)
    recording.add_caller_audio(caller[SECOND:], RATE)
    await written_through(recording)
    # The process is killed here: no save, the header was never finished.
    on_disk = partial_path(recording.path)
    assert on_disk.stat().st_size == 44 + int(2.5 * RATE) * 4  # every final frame
    assert on_disk.stat().st_mode & 0o077 == 0  # readable by its owner alone

    kept = salvage(recording.path)

    assert kept is not None and kept.repaired and kept.seconds == 2.5
    frames, data = frames_of(kept.path)
    whole = interleave(caller, agent.rjust(SECOND + len(agent), b"\0"))
    assert frames == int(2.5 * RATE) and data == whole[: len(data)]
    assert not on_disk.exists()


async def test_a_finished_recording_holds_both_sides_exactly(session, writer, tmp_path):
    recording = StereoRecording(session, tmp_path, RATE, flush_every_s=0.5)
    caller, agent = speech(1.7, 7), speech(1.4, -9)
    recording.add_caller_audio(caller[: SECOND], RATE)
    await written_through(recording)
    recording.add_agent_audio(agent, RATE)  # plays past the caller's clock
    recording.add_caller_audio(caller[SECOND:], RATE)

    assert await recording.save()

    frames, data = frames_of(recording.path)
    expected = interleave(caller, bytes(SECOND) + agent)
    assert frames == len(expected) // 4 and data == expected
    assert not partial_path(recording.path).exists()
    assert writer.events("recording_saved")[0].data == {"seconds": 2.4}


async def test_when_the_disk_refuses_a_chunk_the_whole_recording_is_written_at_the_end(
        session, writer, tmp_path, monkeypatch):
    def refuse(self, pcm):
        raise OSError("disk full")

    monkeypatch.setattr(GrowingWav, "append", refuse)
    recording = StereoRecording(session, tmp_path, RATE, flush_every_s=0.5)
    caller = speech(1.2, 3)
    recording.add_caller_audio(caller, RATE)
    await written_through(recording)
    monkeypatch.undo()

    assert await recording.save()

    assert frames_of(recording.path)[1] == interleave(caller, b"")
    assert [e.data for e in writer.events("recording_stream_failed")] == [{"error": "OSError"}]


def test_repair_cuts_a_half_written_frame_and_refuses_what_is_not_a_wav(tmp_path):
    wav = GrowingWav(tmp_path / "cut.wav", RATE, 2)
    wav.append(b"\x01\x00\x02\x00" * 100 + b"\x03\x00")  # the last frame half written
    wav.abandon()
    partial = partial_path(tmp_path / "cut.wav")

    assert repair(partial) == (100 / RATE, True)
    assert frames_of(partial)[0] == 100
    assert repair(partial) == (100 / RATE, False)  # already right: left alone
    (tmp_path / "noise.wav").write_bytes(b"not a wav at all" * 10)
    assert repair(tmp_path / "noise.wav") is None
    assert salvage(tmp_path / "missing.wav") is None
