"""The caller's audio: G.711 μ-law, 20 ms framing and pacing, and Twilio's playback buffer."""

from __future__ import annotations

import asyncio
import time
import warnings

import numpy as np
import pytest

from simulator.caller_audio import (
    FRAME_BYTES,
    SILENCE_FRAME,
    ULAW_SILENCE,
    AgentPlayout,
    CallerMicrophone,
    FrameClock,
    decode_ulaw,
    encode_ulaw,
    is_voiced,
    split_frames,
)
from tests.simulator.fake_service import tone_ulaw


@pytest.mark.timeout(10)
def test_encoding_matches_the_g711_reference_for_every_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    every_sample = np.arange(-32768, 32768, dtype="<i2").tobytes()

    encoded = encode_ulaw(every_sample)

    assert encoded == audioop.lin2ulaw(every_sample, 2)
    assert decode_ulaw(bytes(range(256))).tobytes() == audioop.ulaw2lin(bytes(range(256)), 2)


@pytest.mark.timeout(10)
def test_digital_silence_is_the_ulaw_silence_byte():
    assert encode_ulaw(b"\x00\x00" * 4) == bytes([ULAW_SILENCE]) * 4


@pytest.mark.timeout(10)
def test_audio_is_cut_into_160_byte_frames_padded_with_silence():
    frames = split_frames(b"\x10" * 400)

    assert [len(frame) for frame in frames] == [FRAME_BYTES] * 3
    assert frames[-1] == b"\x10" * 80 + bytes([ULAW_SILENCE]) * 80


@pytest.mark.timeout(10)
def test_a_tone_is_voiced_and_line_silence_is_not():
    assert is_voiced(tone_ulaw(0.04))
    assert not is_voiced(SILENCE_FRAME)


@pytest.mark.timeout(10)
async def test_the_frame_clock_keeps_20_ms_on_average_without_drift():
    clock = FrameClock()
    started = time.monotonic()

    for _ in range(50):
        await clock.next_frame()
        await asyncio.sleep(0.003)  # work between frames must not push the schedule back

    elapsed = time.monotonic() - started
    assert 0.97 <= elapsed / (49 * 0.02) <= 1.08


@pytest.mark.timeout(10)
async def test_the_microphone_carries_speech_then_silence_and_says_when_done():
    mic = CallerMicrophone()
    done = mic.say([b"a" * FRAME_BYTES, b"b" * FRAME_BYTES])

    sent = [mic.next_frame() for _ in range(3)]

    assert sent == [b"a" * FRAME_BYTES, b"b" * FRAME_BYTES, SILENCE_FRAME]
    assert done.done()


@pytest.mark.timeout(10)
def test_agent_audio_sent_in_a_burst_is_heard_in_real_time():
    playout = AgentPlayout(merge_gap_s=0.8)
    chunk = tone_ulaw(0.04)

    for _ in range(25):  # one second of audio, all arriving at t = 0
        playout.receive_media(chunk, now=0.0)

    assert playout.segments[0].start_s == 0.0
    assert playout.segments[0].end_s == pytest.approx(1.0)
    assert not playout.turn_finished(since=0.0, now=1.5, quiet_s=0.8)
    assert playout.turn_finished(since=0.0, now=1.85, quiet_s=0.8)


@pytest.mark.timeout(10)
def test_a_mark_is_answered_once_the_audio_before_it_has_played():
    playout = AgentPlayout()
    playout.receive_media(tone_ulaw(0.5), now=0.0)
    playout.receive_mark("end-of-greeting", now=0.0)

    assert playout.due_marks(now=0.3) == []
    assert playout.due_marks(now=0.5) == ["end-of-greeting"]


@pytest.mark.timeout(10)
def test_clear_drops_unplayed_audio_and_releases_pending_marks():
    playout = AgentPlayout()
    playout.receive_media(tone_ulaw(2.0), now=0.0)
    playout.receive_mark("after", now=0.0)

    dropped, marks = playout.clear(now=0.5)

    assert dropped == pytest.approx(1.5)
    assert marks == ["after"]
    assert playout.segments[0].end_s == 0.5 and playout.segments[0].cut_short


@pytest.mark.timeout(10)
def test_pauses_shorter_than_the_quiet_gap_stay_in_one_agent_turn():
    playout = AgentPlayout(merge_gap_s=0.8)
    playout.receive_media(tone_ulaw(0.4), now=0.0)
    playout.receive_media(SILENCE_FRAME * 2, now=0.4)
    playout.receive_media(tone_ulaw(0.4), now=0.9)
    playout.receive_media(tone_ulaw(0.4), now=3.0)

    assert [(s.start_s, round(s.end_s, 2)) for s in playout.segments] == [(0.0, 1.3), (3.0, 3.4)]


@pytest.mark.timeout(10)
def test_agent_audio_still_queued_when_the_caller_hangs_up_is_never_heard():
    playout = AgentPlayout()
    playout.receive_media(tone_ulaw(2.0), now=0.0)
    playout.receive_media(tone_ulaw(1.0), now=0.0)

    playout.hang_up(now=0.5)

    assert [(s.start_s, s.end_s) for s in playout.segments] == [(0.0, 0.5)]
