"""Byte ranges, channel extraction and the waveform envelope, on real WAV files."""

import wave

import numpy as np
import pytest

from db import recording_files as rec
from db.recording_files import ByteRange, RangeNotSatisfiable, parse_range
from tests.recordings.audio import RATE, caller_tone_recording


@pytest.mark.parametrize(("header", "expected"), [
    ("bytes=0-99", ByteRange(0, 99)),
    ("bytes=100-", ByteRange(100, 999)),
    ("bytes=-10", ByteRange(990, 999)),
    ("bytes=-5000", ByteRange(0, 999)),       # suffix longer than the file: all of it
    ("bytes=990-5000", ByteRange(990, 999)),  # end past the file: clipped
    ("Bytes = 5 - 5", ByteRange(5, 5)),
    ("bytes=999-999", ByteRange(999, 999)),
])
def test_single_ranges_in_every_form(header, expected):
    assert parse_range(header, 1000) == expected


@pytest.mark.parametrize("header", [
    None, "", "bytes=", "bytes=-", "items=0-1", "bytes=a-b", "bytes=5-2",
    "bytes=0-1,5-6", "0-10", "bytes=--1",
])
def test_absent_or_malformed_ranges_mean_the_whole_file(header):
    assert parse_range(header, 1000) is None


@pytest.mark.parametrize(("header", "size"), [
    ("bytes=1000-", 1000), ("bytes=1000-2000", 1000), ("bytes=-0", 1000), ("bytes=0-", 0),
    ("bytes=-1", 0),
])
def test_ranges_past_the_end_are_unsatisfiable(header, size):
    with pytest.raises(RangeNotSatisfiable):
        parse_range(header, size)


def test_positions_of_thousands_of_digits_are_past_the_end_never_an_error():
    digits = "9" * 5000
    with pytest.raises(RangeNotSatisfiable):
        parse_range(f"bytes={digits}-", 1000)
    assert parse_range(f"bytes=0-{digits}", 1000) == ByteRange(0, 999)
    assert parse_range(f"bytes=-{digits}", 1000) == ByteRange(0, 999)
    assert parse_range(f"bytes={'0' * 5000}7-{'0' * 5000}9", 1000) == ByteRange(7, 9)
    assert parse_range(f"bytes={digits}-5", 1000) is None  # end before start: ignored


def test_content_range_and_length():
    assert ByteRange(10, 19).length == 10
    assert ByteRange(10, 19).content_range(100) == "bytes 10-19/100"


def test_iter_file_returns_exactly_the_slice(tmp_path):
    path = tmp_path / "blob"
    data = bytes(range(256)) * 1000
    path.write_bytes(data)
    assert b"".join(rec.iter_file(path, 1000, 100_000)) == data[1000:101_000]
    assert b"".join(rec.iter_file(path, len(data) - 5, 50)) == data[-5:]


def test_caller_channel_has_the_tone_and_the_agent_is_silent(tmp_path):
    recording = caller_tone_recording(tmp_path / "call.wav")

    caller = rec.channel_wav(recording, "caller")
    agent = rec.channel_wav(recording, "agent")

    assert caller == tmp_path / "call.caller.wav" and agent == tmp_path / "call.agent.wav"
    stereo = rec.read_wav(recording).samples
    for path, side in ((caller, 0), (agent, 1)):
        with wave.open(str(path)) as mono:
            assert (mono.getnchannels(), mono.getsampwidth(), mono.getframerate()) == (1, 2, RATE)
            samples = np.frombuffer(mono.readframes(mono.getnframes()), dtype="<i2")
        assert np.array_equal(samples, stereo[:, side])
    assert np.abs(stereo[:, 0]).max() > 15000 and not stereo[:, 1].any()


def test_channel_cache_is_reused_and_remade_when_the_recording_changes(tmp_path):
    recording = caller_tone_recording(tmp_path / "call.wav")
    cached = rec.channel_wav(recording, "caller")
    first = cached.stat().st_mtime_ns
    assert rec.channel_wav(recording, "caller").stat().st_mtime_ns == first

    caller_tone_recording(recording, tone_s=2.0)  # rewritten later: the cache is stale
    remade = rec.channel_wav(recording, "caller")
    assert rec.read_wav(remade).samples.shape[0] == 4 * RATE


def test_unwritable_cache_serves_the_channel_from_memory(tmp_path):
    recording = caller_tone_recording(tmp_path / "call.wav")
    (tmp_path / "call.agent.wav").mkdir()  # where the cache would go: cannot be replaced
    data = rec.channel_wav(recording, "agent")
    assert isinstance(data, bytes) and data[:4] == b"RIFF"
    assert len(data) == 44 + 3 * RATE * 2


def test_waveform_has_one_peak_per_point_and_the_tone_where_it_is(tmp_path):
    recording = caller_tone_recording(tmp_path / "call.wav")  # 1 s quiet, 1 s tone, 1 s quiet

    shape = rec.waveform(recording, 300)

    assert (shape.sample_rate, shape.duration_ms, shape.points) == (RATE, 3000, 300)
    assert len(shape.caller) == len(shape.agent) == 300
    assert all(0.0 <= v <= 1.0 for v in shape.caller + shape.agent)
    assert max(shape.agent) == 0.0
    quiet, loud = shape.caller[:95] + shape.caller[205:], shape.caller[105:195]
    assert max(quiet) == 0.0
    assert min(loud) > 0.45  # 16000 / 32768 ≈ 0.49


def test_peaks_with_more_points_than_samples_and_no_samples():
    assert rec.peaks(np.array([16384, -32768], dtype="<i2"), 4) == [0.0, 0.5, 0.0, 1.0]
    assert rec.peaks(np.array([], dtype="<i2"), 3) == [0.0, 0.0, 0.0]
