"""Junk on a live media stream is recorded and dropped; too much ends that call only."""

import base64
import json

from pipecat.frames.frames import (
    CancelWorkerFrame,
    InputAudioRawFrame,
    InputDTMFFrame,
    StartFrame,
)

from call.call_session import CompletionReason
from services.twilio.serializer import SafeTwilioFrameSerializer
from tests.fakes import make_session


async def serializer_for(session, max_bad: int = 3) -> SafeTwilioFrameSerializer:
    serializer = SafeTwilioFrameSerializer(
        "MZ123", session=session, max_message_bytes=4096, max_bad=max_bad,
        params=SafeTwilioFrameSerializer.InputParams(auto_hang_up=False),
    )
    await serializer.setup(StartFrame(audio_in_sample_rate=8000, audio_out_sample_rate=8000))
    return serializer


def media_message() -> str:
    return json.dumps({"event": "media", "media": {"payload": base64.b64encode(b"\xff" * 160).decode()}})


async def test_media_still_becomes_audio(writer):
    serializer = await serializer_for(make_session(writer))
    frame = await serializer.deserialize(media_message())
    assert isinstance(frame, InputAudioRawFrame) and frame.sample_rate == 8000


async def test_garbage_is_dropped_and_recorded_without_its_content(writer):
    session = make_session(writer)
    serializer = await serializer_for(session, max_bad=10)
    for junk in ["{oops", '{"event": "dance"}', "x" * 5000, '{"event":"media","media":{"payload":"!!"}}']:
        assert await serializer.deserialize(junk) is None
    kinds = [e.data["kind"] for e in writer.events("bad_input")]
    assert kinds == ["invalid_json", "unknown_event", "oversized", "media_bad_base64"]
    assert "oops" not in str([e.data for e in writer.events()])


async def test_too_many_bad_messages_end_the_call_as_a_protocol_error(writer):
    session = make_session(writer)
    serializer = await serializer_for(session, max_bad=3)
    results = [await serializer.deserialize("{bad") for _ in range(3)]
    assert results[:2] == [None, None] and isinstance(results[2], CancelWorkerFrame)
    assert session.completion_reason is CompletionReason.PROTOCOL_ERROR


async def test_twilio_stop_means_the_caller_hung_up(writer):
    session = make_session(writer)
    serializer = await serializer_for(session)
    frame = await serializer.deserialize(json.dumps({"event": "stop", "stop": {}}))
    assert isinstance(frame, CancelWorkerFrame) and session.caller_hung_up


async def test_a_malformed_dtmf_is_a_bad_message_and_the_call_goes_on(writer):
    session = make_session(writer)
    serializer = await serializer_for(session, max_bad=10)
    malformed = [{"event": "dtmf", "dtmf": "5"}, {"event": "dtmf"},
                 {"event": "dtmf", "dtmf": {"digit": ["5"]}}, {"event": "dtmf", "dtmf": {"digit": "55"}},
                 {"event": "dtmf", "dtmf": {"digit": None}}]
    dropped = [await serializer.deserialize(json.dumps(m)) for m in malformed]
    pressed = await serializer.deserialize(json.dumps({"event": "dtmf", "dtmf": {"digit": "#"}}))

    assert dropped == [None] * len(malformed)
    assert isinstance(pressed, InputDTMFFrame) and pressed.button.value == "#"
    assert [e.data["kind"] for e in writer.events("bad_input")] == ["dtmf_malformed"] * 5
    assert session.completion_reason is None


async def test_a_binary_frame_is_a_bad_message_whatever_it_holds(writer):
    session = make_session(writer)
    serializer = await serializer_for(session, max_bad=10)
    assert await serializer.deserialize(media_message().encode()) is None
    assert await serializer.deserialize(b"\x00\xff") is None
    assert [e.data["kind"] for e in writer.events("bad_input")] == ["binary", "binary"]
