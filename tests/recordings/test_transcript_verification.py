"""verify-transcript: scoring, Deepgram pre-recorded (local fake of its documented
protocol), the local recognizer on real synthesized speech, and the endpoint; the clinic's
vocabulary each is told, and the missed words proposed as keyterms."""

import asyncio
import uuid

import numpy as np
import pytest

from call.recording import interleave, write_wav
from config import Settings
from db import repositories as repo
from db import stt_suggestions as stt
from db.seed import seed_world
from runner import transcript_verification as tv
from runner.call_vocabulary import CallVocabulary
from services.espeak.engine import synthesize_script
from tests.api.app_client import app_in_testclient
from tests.recordings.deepgram_fake import serve_deepgram

pytestmark = pytest.mark.timeout(120)
RATE = 8000
CALLER_LINE = "I would like to book an appointment"
AGENT_LINE = "I can book you in tomorrow morning"


def test_wer_of_a_known_pair():
    reference = "i would like to book an appointment"
    # one substitution (like -> love), one deletion (an): 2 errors in 7 reference words
    assert tv.word_error_rate(reference, "I would love to book appointment.") == \
        pytest.approx(2 / 7)
    assert tv.accuracy_of(2 / 7) == pytest.approx(5 / 7)
    assert tv.word_error_rate("Tuesday, at 3 P.M.!", "tuesday at 3 pm") == 0.0
    assert tv.word_error_rate("", "") == 0.0 and tv.word_error_rate("", "hello") == 1.0
    assert tv.accuracy_of(1.5) == 0.0


def test_normalise():
    assert tv.normalise("  Hi, I'm   Dr. Okafor's patient!  ") == "hi im dr okafors patient"


def test_listen_url_from_the_deepgram_host_setting():
    assert tv.deepgram_listen_url(None) == "https://api.deepgram.com/v1/listen"
    assert tv.deepgram_listen_url("wss://dg.example/") == "https://dg.example/v1/listen"
    assert tv.deepgram_listen_url("ws://127.0.0.1:9") == "http://127.0.0.1:9/v1/listen"
    assert tv.deepgram_listen_url("api.eu.deepgram.com") == "https://api.eu.deepgram.com/v1/listen"


def test_speech_spans_split_at_silence():
    quiet, loud = np.zeros(RATE, dtype="<i2"), np.full(RATE // 2, 5000, dtype="<i2")
    samples = np.concatenate([quiet, loud, quiet, loud, quiet])
    spans = tv.speech_spans(samples, RATE)
    pad = int(tv.SPAN_PAD_S * RATE)
    assert spans == [(RATE - pad, RATE + RATE // 2 + pad),
                     (2 * RATE + RATE // 2 - pad, 3 * RATE + pad)]
    assert tv.speech_spans(np.zeros(RATE, dtype="<i2"), RATE) == []


async def spoken_recording(path):
    """The caller's line at 0.5 s on the left, the agent's answer at 3.5 s on the right."""
    caller, agent = await synthesize_script([(CALLER_LINE, {}), (AGENT_LINE, {})], RATE)
    left = bytes(RATE) + caller  # 0.5 s of silence
    right = bytes(RATE * 7) + agent  # 3.5 s
    write_wav(path, interleave(left, right), RATE, 2)
    return path


async def test_the_local_recognizer_transcribes_each_channel_with_word_times(tmp_path):
    recording = await spoken_recording(tmp_path / "call.wav")

    verification = await tv.local_verify(recording)

    assert verification.verifier == tv.LOCAL_VERIFIER
    assert tv.word_error_rate(CALLER_LINE, verification.text("caller")) <= 0.15
    assert tv.word_error_rate(AGENT_LINE, verification.text("agent")) <= 0.5
    caller = [w for w in verification.words if w.speaker == "caller"]
    agent = [w for w in verification.words if w.speaker == "agent"]
    assert caller[0].start_ms == pytest.approx(500, abs=120)
    assert agent[0].start_ms == pytest.approx(3500, abs=120)
    assert all(w.start_ms < w.end_ms for w in verification.words)
    assert verification.transcript().splitlines()[0].startswith("caller: i would")


async def test_deepgram_request_and_response_follow_the_documented_protocol(tmp_path):
    recording = await spoken_recording(tmp_path / "call.wav")
    async with serve_deepgram([("I'd like to book an appointment.", 0.5),
                               ("Which day suits you?", 3.5)]) as deepgram:
        verification = await tv.deepgram_verify(
            recording.read_bytes(), api_key="dg-key", base_url=deepgram.base_url, timeout_s=10)

    [request] = deepgram.requests
    assert request["path"] == "/v1/listen"
    assert request["headers"]["Authorization"] == "Token dg-key"
    assert request["headers"]["Content-Type"] == "audio/wav"
    assert request["query"] == {"model": "nova-3", "smart_format": "true",
                                "utterances": "true", "multichannel": "true"}
    assert request["channels"] == 2 and request["bytes"] == recording.stat().st_size
    assert verification.verifier == "deepgram:nova-3"
    assert verification.text("caller") == "I'd like to book an appointment."
    assert verification.text("agent") == "Which day suits you?"
    first = verification.words[0]
    assert (first.word, first.start_ms, first.end_ms, first.speaker, first.confidence) == (
        "I'd", 500, 800, "caller", 0.98)


async def recorded_call(db, workspace_id, tmp_path, caller_turns):
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    recording = await spoken_recording(tmp_path / f"{call_id}.wav")
    await repo.update_call(db.pool, call_id, recording_path=str(recording))
    for seq, (role, text) in enumerate(caller_turns, start=1):
        await db.pool.execute(
            "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) "
            "VALUES ($1, $2, $3, $3, $4)", uuid.UUID(call_id), seq, role, text)
    return call_id


def post(client, path, headers):
    return asyncio.to_thread(client.post, path, headers=headers)


@pytest.mark.usefixtures("worker_pools_started")
async def test_endpoint_with_deepgram_stores_the_verification(tmp_path, pg_dsn, db, workspace_id):
    call_id = await recorded_call(db, workspace_id, tmp_path, [
        ("caller", "I would love to book"), ("agent", "Which day?"), ("caller", "appointment")])
    auth = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, workspace_id)}"}
    async with serve_deepgram([("I would like to book an appointment.", 0.5),
                               ("Which day suits you?", 3.5)],
                              answers=["ok", 500, ("slow", 6)]) as deepgram:
        settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn,
                            stt_provider="local", deepgram_api_key="dg-key",
                            deepgram_base_url=deepgram.base_url, transcript_verify_timeout_s=3)
        with app_in_testclient(settings) as client:
            url = f"/api/calls/{call_id}/verify-transcript"
            ok = await post(client, url, auth)
            stored = await repo.get_call(db.pool, call_id)
            failed = await post(client, url, auth)
            slow = await post(client, url, auth)
            detail = await asyncio.to_thread(client.get, f"/api/calls/{call_id}", headers=auth)
        after = await repo.get_call(db.pool, call_id)

    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert body["verifier"] == "deepgram:nova-3" and body["words"] == 11
    assert body["wer"] == pytest.approx(2 / 7, abs=1e-4)  # like->love, "an" missing
    assert body["accuracy"] == pytest.approx(5 / 7, abs=1e-4)
    assert body["transcript"] == ("caller: I would like to book an appointment.\n"
                                  "agent: Which day suits you?")
    assert stored["transcript_verifier"] == "deepgram:nova-3"
    assert stored["transcript_accuracy"] == pytest.approx(5 / 7)
    assert stored["verified_transcript"] == body["transcript"]
    assert stored["verified_words"][0] == {"word": "I", "start_ms": 500, "end_ms": 800,
                                           "speaker": "caller", "confidence": 0.98}
    assert stored["transcript_verified_at"] is not None
    assert (failed.status_code, failed.json()["detail"]) == (502, "Deepgram answered HTTP 500")
    assert (slow.status_code, slow.json()["detail"]) == (504, "transcript verification timed out")
    assert after == stored  # failures leave the stored verification as it was
    shown = detail.json()
    assert shown["transcript_accuracy"] == pytest.approx(5 / 7)
    assert shown["verified_words"][0]["speaker"] == "caller"


@pytest.mark.usefixtures("worker_pools_started")
async def test_endpoint_local_auth_and_missing_recordings(tmp_path, pg_dsn, db, workspace_id):
    call_id = await recorded_call(db, workspace_id, tmp_path, [("caller", CALLER_LINE)])
    unrecorded = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    auth = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, workspace_id)}"}
    theirs = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, other['id'])}"}
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)
    url = f"/api/calls/{call_id}/verify-transcript"
    with app_in_testclient(settings) as client:
        anonymous = await post(client, url, {})
        hidden = await post(client, url, theirs)
        no_recording = await post(client, f"/api/calls/{unrecorded}/verify-transcript", auth)
        ok = await post(client, url, auth)

    assert anonymous.status_code == 401 and hidden.status_code == 404
    assert (no_recording.status_code, no_recording.json()["detail"]) == (
        409, "call has no recording")
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert body["verifier"] == "local:pocketsphinx"
    assert body["accuracy"] >= 0.85 and body["words"] >= 8
    stored = await repo.get_call(db.pool, call_id)
    assert stored["transcript_accuracy"] == pytest.approx(body["accuracy"], abs=1e-4)
    assert {w["speaker"] for w in stored["verified_words"]} == {"caller", "agent"}


# --- The clinic's vocabulary and the keyterms it proposes -------------------------------


async def clinic_call(db, workspace_id, service_id, tmp_path, caller_turns):
    call_id = await recorded_call(db, workspace_id, tmp_path, caller_turns)
    await db.pool.execute("UPDATE calls SET service_id = $2 WHERE id = $1",
                          uuid.UUID(call_id), uuid.UUID(service_id))
    return call_id


@pytest.mark.usefixtures("worker_pools_started")
async def test_deepgram_is_told_the_clinic_vocabulary_and_misses_become_suggestions(
        tmp_path, pg_dsn, db, demo_clinic):
    workspace_id, service_id = demo_clinic
    await seed_world(db.pool, workspace_id)  # the patients' charts
    call_id = await clinic_call(db, workspace_id, service_id, tmp_path, [
        ("caller", "I need my Lisinopril refilled"), ("agent", "Of course."),
        ("caller", "and to see doctor oak a four about my met four men")])
    auth = {"Authorization": f"Bearer {await repo.create_api_key(db.pool, workspace_id)}"}
    said = "I need my Lisinopril refilled and to see Doctor Okafor about my Metformin."
    async with serve_deepgram([(said, 0.5), ("Of course.", 3.5)]) as deepgram:
        settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn,
                            deepgram_api_key="dg-key", deepgram_base_url=deepgram.base_url)
        with app_in_testclient(settings) as client:
            answer = await post(client, f"/api/calls/{call_id}/verify-transcript", auth)
    proposed = await stt.list_suggestions(db.pool, workspace_id, service_id=service_id)

    assert answer.status_code == 200, answer.text
    assert answer.json()["suggested"] == 2
    [request] = deepgram.requests
    keyterms = request["keyterms"]
    assert {"Dr. James Okafor", "Physiotherapy session", "Northside", "Metformin",
            "Lisinopril", "Aetna", "Medicare", "appointment"} <= set(keyterms)
    assert not any(name in term for term in keyterms
                   for name in ("Margaret", "Chen", "Walsh", "Okonkwo"))  # never patients
    assert request["query"]["model"] == "nova-3"
    by_term = {s["term"]: s for s in proposed}
    assert set(by_term) == {"Okafor", "Metformin"}  # Lisinopril was heard right
    assert by_term["Okafor"]["evidence"] == [
        {"call_id": call_id, "heard": "oak a four", "at_ms": 4100, "source": "verification"}]
    assert by_term["Metformin"]["evidence"][0]["heard"] == "met four men"
    assert by_term["Metformin"]["calls_missed"] == 1
    assert by_term["Okafor"]["status"] == "proposed"


def test_deepgram_keyterms_stay_within_its_documented_bounds():
    many = tuple(f"Term{n} Name" for n in range(300))
    chosen = CallVocabulary(lexicon=many).for_deepgram()
    assert len(chosen) <= 100 and sum(len(t.split()) for t in chosen) <= 250
    assert chosen == list(many[:len(chosen)])  # the first terms: the call's own keyterms
    params = tv.deepgram_params(["Dr. Okafor", "Metformin"])
    assert params[-2:] == [("keyterm", "Dr. Okafor"), ("keyterm", "Metformin")]


async def test_the_local_recognizer_hears_a_name_once_given_the_clinic_vocabulary(tmp_path):
    line = "I would like to see Doctor Okafor"
    [caller] = await synthesize_script([(line, {})], RATE)
    recording = tmp_path / "call.wav"
    write_wav(recording, interleave(bytes(RATE) + caller, bytes(RATE + len(caller))), RATE, 2)

    try:
        plain = await tv.local_verify(recording)
        told = await tv.local_verify(recording, ["Dr. James Okafor", "Metformin"])
    finally:
        tv.shutdown_local_pool()  # a fresh decoder for the next test: it keeps added words

    assert "Okafor" not in plain.text("caller").split()
    assert "Okafor" in told.text("caller").split()  # the keyterm's own spelling
