"""Audio mode against a fake Twilio-protocol service: the simulator must behave like Twilio."""

from __future__ import annotations

import base64
import json

import pytest

from simulator.simulator import CallScript, SimulationError, format_transcript, simulate_call
from tests.simulator.conftest import API_KEY, TOKEN, tone_voice
from tests.simulator.fake_service import FakeAgent

QUIET_S = 0.8


def script(*turns: dict, **extra) -> CallScript:
    return CallScript.model_validate(
        {"from": "+15550100123", "to": "+15550100100", "turns": list(turns), **extra}
    )


async def call(url: str, the_script: CallScript, **kwargs):
    return await simulate_call(
        the_script, base_url=url, api_key=API_KEY, twilio_token=TOKEN, log=lambda _line: None,
        synthesize=tone_voice, **kwargs,
    )


@pytest.mark.timeout(30)
async def test_a_call_follows_the_media_stream_protocol_and_reads_back_the_record(fake_service):
    service, url = fake_service(
        agent=FakeAgent(greeting_s=1.0, reply_s=0.6, hang_up_after_reply=2), record_delay_s=1.5
    )
    lines = ["I would like to book", "yes please"]

    result = await call(url, script(*({"say": line, "pause_s": 0.2} for line in lines)))

    stream = service.only_call.stream
    events = [m["event"] for _, m in stream.messages]
    assert events[:2] == ["connected", "start"]
    assert set(events[2:]) <= {"media", "mark"}
    start = stream.messages[1][1]
    assert start["start"]["customParameters"] == {"call_id": result.call_id}
    assert start["start"]["mediaFormat"] == {
        "encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1,
    }
    assert start["start"]["callSid"].startswith("CA") and len(start["start"]["callSid"]) == 34
    media = stream.of("media")
    assert all(len(base64.b64decode(m["media"]["payload"])) == 160 for _, m in media)
    sequence = [int(m["sequenceNumber"]) for _, m in stream.messages[1:]]
    assert sequence == list(range(1, len(sequence) + 1))
    assert [int(m["media"]["chunk"]) for _, m in media] == list(range(1, len(media) + 1))
    average_gap = (media[-1][0] - media[0][0]) / (len(media) - 1)
    assert 0.019 <= average_gap <= 0.0215
    assert result.ended_by == "agent"
    assert result.record_error is None  # polled until the delayed completion_reason landed
    assert result.to_json_dict() == {
        "call_id": result.call_id,
        "completion_reason": "agent_hangup",
        "final_state": "done",
        "turns": [
            {"speaker_role": role, "text": text}
            for role, text in [
                ("agent", "greeting"), ("caller", "utterance 1"), ("agent", "reply 1"),
                ("caller", "utterance 2"), ("agent", "reply 2"),
            ]
        ],
        "tool_calls": [],
        "transitions": [],
        "events": [],
    }
    json.dumps(result.to_json_dict())


@pytest.mark.timeout(30)
async def test_the_caller_waits_for_the_agent_to_finish_before_speaking(fake_service):
    service, url = fake_service(agent=FakeAgent(greeting_s=1.0, reply_s=0.6, hang_up_after_reply=1))

    result = await call(url, script({"say": "I would like to book", "pause_s": 0.3}))

    stream = service.only_call.stream
    _, greeting_end, _ = stream.playback[0]
    first_voice = stream.voiced_media_times()[0]
    assert first_voice - greeting_end >= QUIET_S + 0.3 - 0.05
    assert first_voice - greeting_end <= QUIET_S + 0.3 + 0.3
    assert stream.barge_ins == []
    heard = [(round(s.end_s - s.start_s, 1), s.cut_short) for s in result.agent_speech]
    assert heard == [(1.0, False), (0.6, False)]


@pytest.mark.timeout(30)
async def test_audio_sent_in_a_burst_is_played_in_real_time_and_marks_wait_for_it(fake_service):
    service, url = fake_service(
        agent=FakeAgent(greeting_s=1.5, reply_s=0.4, hang_up_after_reply=1, burst_greeting=True)
    )

    await call(url, script({"say": "hello there", "pause_s": 0.0}))

    stream = service.only_call.stream
    (sent_at, audio_end, name), = stream.marks_sent
    (echoed_at, echo), = stream.of("mark")
    assert echo["mark"] == {"name": name}
    assert echo["streamSid"] == stream.messages[1][1]["streamSid"]
    assert echoed_at - sent_at >= 1.5 - 0.15  # held until the burst had played out
    assert stream.voiced_media_times()[0] - audio_end >= QUIET_S - 0.05


@pytest.mark.timeout(30)
async def test_a_barge_in_talks_over_the_agent_and_logs_its_clear(fake_service):
    service, url = fake_service(agent=FakeAgent(greeting_s=4.0, reply_s=0.5, hang_up_after_reply=1))

    result = await call(url, script({"say": "sorry I need to reschedule", "barge_in": True}))

    stream = service.only_call.stream
    greeting_start = stream.playback[0][0]
    assert 0.35 <= stream.voiced_media_times()[0] - greeting_start <= 0.9
    assert len(stream.barge_ins) == 1
    kinds = [event.kind for event in result.client_log]
    assert kinds.index("barge_in") < kinds.index("clear")
    assert result.agent_speech[0].cut_short
    assert "cut short by clear" in format_transcript(result)


@pytest.mark.timeout(30)
async def test_a_caller_hanging_up_mid_reply_sends_stop_then_the_status_callback(fake_service):
    service, url = fake_service(agent=FakeAgent(greeting_s=0.6, reply_s=3.0))
    result = await call(
        url, script({"say": "I am calling about my results", "pause_s": 0.0}, hangup_after_s=1.0)
    )

    the_call = service.only_call
    _, last = the_call.stream.messages[-1]
    assert last["event"] == "stop"
    assert last["stop"]["callSid"] == the_call.answer_form["CallSid"]
    assert result.ended_by == "caller"
    (hangup,) = [e for e in result.client_log if e.kind == "caller_hangup"]
    assert hangup.detail == "during the agent's turn"
    assert result.agent_speech[-1].end_s <= hangup.at_s + 0.05  # the rest was never heard
    (status,) = the_call.status_forms
    assert status["CallStatus"] == "completed"
    assert status["CallSid"] == the_call.answer_form["CallSid"]
    assert int(status["CallDuration"]) >= 1
    assert result.to_json_dict()["completion_reason"] == "caller_hangup"


@pytest.mark.timeout(15)
async def test_a_wrong_signing_token_is_reported_as_a_rejected_signature(fake_service):
    service, url = fake_service(token="a-different-token")

    with pytest.raises(SimulationError, match="rejected the webhook signature"):
        await call(url, script({"say": "hello"}))

    assert service.rejected_signatures == 1 and service.calls == {}


@pytest.mark.timeout(15)
async def test_a_stream_the_server_refuses_at_start_is_an_error_not_a_call(fake_service):
    service, url = fake_service(agent=FakeAgent(refuse_stream=True))

    with pytest.raises(SimulationError, match="refused the media stream.*1008 unknown call"):
        await call(url, script({"say": "hello"}))

    (status,) = service.only_call.status_forms  # Twilio still reports the call as over
    assert status["CallStatus"] == "completed"


@pytest.mark.timeout(30)
async def test_by_default_the_caller_speaks_with_the_espeak_voice(fake_service):
    from services.espeak.engine import synthesize_pcm

    service, url = fake_service(agent=FakeAgent(greeting_s=0.4, reply_s=0.4, hang_up_after_reply=1))
    line = "Yes, please."
    expected_s = len(await synthesize_pcm(line, 8000)) / 2 / 8000

    result = await simulate_call(
        script({"say": line, "pause_s": 0.0}), base_url=url, api_key=API_KEY,
        twilio_token=TOKEN, log=lambda _line: None,
    )

    voiced = service.only_call.stream.voiced_media_times()
    assert result.ended_by == "agent"
    assert voiced[-1] - voiced[0] == pytest.approx(expected_s, abs=0.25)
