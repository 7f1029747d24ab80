"""The recording routes through the real app: auth, workspaces, ranges, channels, envelope."""

import io
import uuid
import wave

import numpy as np
import pytest

from db import repositories as repo
from tests.api.app_client import app_in_testclient
from tests.recordings.audio import RATE, caller_tone_recording

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def recorded(tmp_path, db, workspace_id, call_id):
    path = caller_tone_recording(tmp_path / "recordings" / f"{call_id}.wav")
    await repo.update_call(db.pool, call_id, recording_path=str(path))
    key = await repo.create_api_key(db.pool, workspace_id, "test")
    return call_id, path, {"Authorization": f"Bearer {key}"}


@pytest.fixture
def client(settings, worker_pools_started):
    with app_in_testclient(settings) as client:
        yield client


def test_stereo_whole_and_in_ranges_byte_exact(recorded, client):
    call_id, path, auth = recorded
    data = path.read_bytes()
    size = len(data)
    url = f"/api/calls/{call_id}/recording/stereo"

    whole = client.get(url, headers=auth)
    first = client.get(url, headers={**auth, "Range": "bytes=0-99"})
    tail = client.get(url, headers={**auth, "Range": "bytes=-64"})
    rest = client.get(url, headers={**auth, "Range": f"bytes={size - 1000}-"})
    beyond = client.get(url, headers={**auth, "Range": f"bytes={size}-"})
    malformed = client.get(url, headers={**auth, "Range": "bytes=9-3"})

    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-type"] == "audio/wav"
    assert int(whole.headers["content-length"]) == size
    assert first.status_code == 206 and first.content == data[:100]
    assert first.headers["content-range"] == f"bytes 0-99/{size}"
    assert tail.status_code == 206 and tail.content == data[-64:]
    assert tail.headers["content-range"] == f"bytes {size - 64}-{size - 1}/{size}"
    assert rest.status_code == 206 and rest.content == data[-1000:]
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{size}"
    assert malformed.status_code == 200 and malformed.content == data


def test_a_range_of_thousands_of_digits_is_unsatisfiable_not_a_server_error(recorded, client):
    call_id, path, auth = recorded
    size = path.stat().st_size
    digits = "9" * 5000
    url = f"/api/calls/{call_id}/recording/stereo"

    past_the_end = client.get(url, headers={**auth, "Range": f"bytes={digits}-"})
    whole_suffix = client.get(url, headers={**auth, "Range": f"bytes=-{digits}"})
    channel = client.get(f"/api/calls/{call_id}/recording/caller",
                         headers={**auth, "Range": f"bytes={digits}-{digits}"})

    assert past_the_end.status_code == 416
    assert past_the_end.headers["content-range"] == f"bytes */{size}"
    assert whole_suffix.status_code == 206 and len(whole_suffix.content) == size
    assert channel.status_code == 416


def test_channels_are_mono_wavs_of_each_side_with_ranges(recorded, client):
    call_id, _, auth = recorded
    caller = client.get(f"/api/calls/{call_id}/recording/caller", headers=auth)
    agent = client.get(f"/api/calls/{call_id}/recording/agent", headers=auth)
    part = client.get(f"/api/calls/{call_id}/recording/agent",
                      headers={**auth, "Range": "bytes=44-"})
    nonsense = client.get(f"/api/calls/{call_id}/recording/doctor", headers=auth)

    def samples(body: bytes) -> np.ndarray:
        with wave.open(io.BytesIO(body)) as mono:
            assert (mono.getnchannels(), mono.getframerate()) == (1, RATE)
            return np.frombuffer(mono.readframes(mono.getnframes()), dtype="<i2")

    assert caller.status_code == agent.status_code == 200
    assert np.abs(samples(caller.content)).max() > 15000
    assert not samples(agent.content).any()
    assert part.status_code == 206 and part.content == agent.content[44:]
    assert nonsense.status_code == 422


def test_waveform_envelope(recorded, client):
    call_id, _, auth = recorded
    body = client.get(f"/api/calls/{call_id}/recording/waveform?points=30", headers=auth).json()
    default = client.get(f"/api/calls/{call_id}/recording/waveform", headers=auth).json()
    too_many = client.get(f"/api/calls/{call_id}/recording/waveform?points=100000", headers=auth)

    assert (body["sample_rate"], body["duration_ms"], body["points"]) == (RATE, 3000, 30)
    assert len(body["caller"]) == len(body["agent"]) == 30
    assert max(body["caller"][:9] + body["caller"][21:]) == 0.0
    assert min(body["caller"][11:19]) > 0.45 and max(body["agent"]) == 0.0
    assert default["points"] == len(default["caller"]) == 800
    assert too_many.status_code == 422


async def test_auth_workspaces_and_missing_recordings(recorded, client, db, workspace_id):
    call_id, path, auth = recorded
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    theirs = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, other['id'])}"}
    unrecorded = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    kinds = ("stereo", "caller", "agent", "waveform")

    for kind in kinds:
        url = f"/api/calls/{call_id}/recording/{kind}"
        assert client.get(url).status_code == 401
        assert client.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get(url, headers=theirs).json()["detail"] == "call not found"
        assert client.get(f"/api/calls/not-a-uuid/recording/{kind}", headers=auth
                          ).status_code == 404
        missing = client.get(f"/api/calls/{unrecorded}/recording/{kind}", headers=auth)
        assert (missing.status_code, missing.json()["detail"]) == (404, "call has no recording")

    path.unlink()
    for kind in kinds:
        gone = client.get(f"/api/calls/{call_id}/recording/{kind}", headers=auth)
        assert (gone.status_code, gone.json()["detail"]) == (404, "recording file is missing")


def test_openapi_documents_audio_and_the_channel_enum(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    stereo = paths["/api/calls/{call_id}/recording/stereo"]["get"]["responses"]
    channel = paths["/api/calls/{call_id}/recording/{channel}"]["get"]
    assert "audio/wav" in stereo["200"]["content"] and "audio/wav" in stereo["206"]["content"]
    assert {"401", "404", "416"} <= set(stereo)
    [param] = [p for p in channel["parameters"] if p["name"] == "channel"]
    assert param["schema"]["enum"] == ["caller", "agent"]
    waveform = paths["/api/calls/{call_id}/recording/waveform"]["get"]["responses"]["200"]
    assert "application/json" in waveform["content"]
