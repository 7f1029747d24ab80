"""The control plane over HTTP: voice settings, safety concepts, service keyterms and
escalation actions — each scoped to the key's workspace, and each change seen by the
workspace's next call (`AppRuntime.resolve_profile`, as a ringing call resolves it)."""

import random
import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pipecat.frames.frames import LLMMessagesAppendFrame, TranscriptionFrame
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import SessionMode
from call.voice_settings import DEFAULT_SENSITIVE_TOPICS
from config import Settings
from db import repositories as repo
from db.records import EscalationRecord, write_records
from processors.safety.concepts import default_concepts
from processors.safety.judge import RulesJudge
from processors.safety.monitor import SafetyServices
from processors.safety.safety_monitor_processor import SafetyMonitorProcessor
from services.embeddings import LOCAL_MODEL, LocalEmbedder
from tests.api.app_client import app_in_testclient
from tests.fakes import make_session

pytestmark = pytest.mark.usefixtures("worker_pools_started")  # app_in_testclient

GAMBLING = {
    "key": "gambling_crisis", "name": "Gambling crisis", "severity": "soft",
    "description": "The caller says gambling has put them in danger.",
    "examples": ["I gambled away all my money", "I can't stop gambling and I'm desperate"],
}


def phone() -> str:
    return f"+1555{random.randrange(10**6, 10**7)}"


async def workspace_with_key(db) -> tuple[str, dict[str, str]]:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    key = await repo.create_api_key(db.pool, workspace["id"], "test")
    return workspace["id"], {"Authorization": f"Bearer {key}"}


def errors_at(response) -> set[str]:
    """The fields a 422 names (what follows "body" or "query" in each error's place)."""
    assert response.status_code == 422, response.text
    return {str(error["loc"][1]) for error in response.json()["detail"]}


def next_call(client: TestClient, number: str):
    """The profile a new call to `number` is given, resolved on the app's own loop."""
    runtime = client.app.state.runtime
    return client.portal.call(runtime.resolve_profile, str(uuid.uuid4()), number)


async def test_voice_settings_defaults_strict_validation_and_the_next_call(
        tmp_path, pg_dsn, db):
    workspace_id, mine = await workspace_with_key(db)
    _, theirs = await workspace_with_key(db)
    number = phone()
    await repo.create_service(db.pool, workspace_id, "Riverside", phone_number=number,
                              keyterms=["MRI"])
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        empty = client.get("/api/voice-settings", headers=mine)
        refused = client.put("/api/voice-settings", headers=mine, json={
            "speed": 3, "tone": "angry", "colour": "blue", "fillers_enabled": "yes",
            "keyterms": ["ok", "x" * 61]})
        after_refusal = client.get("/api/voice-settings", headers=mine).json()
        put = client.put("/api/voice-settings", headers=mine,
                         json={"speed": 0.8, "keyterms": ["Dr. Osei", " dr.  osei "]})
        patched = client.patch("/api/voice-settings", headers=mine, json={"tone": "calm"})
        bad_patch = client.patch("/api/voice-settings", headers=mine, json={"volume": "loud"})
        profile = next_call(client, number)
        their_view = client.get("/api/voice-settings", headers=theirs).json()
        anonymous = client.get("/api/voice-settings")
        # Stored by an older writer: a term the strict rules refuse blocks a partial
        # update until that very field is replaced.
        client.portal.call(repo.set_voice_settings, client.app.state.runtime.db.pool,
                           workspace_id, {"speed": 0.9, "keyterms": ["x" * 61]})
        legacy = client.get("/api/voice-settings", headers=mine).json()
        blocked = client.patch("/api/voice-settings", headers=mine, json={"tone": "calm"})
        fixed = client.patch("/api/voice-settings", headers=mine, json={"keyterms": ["MRI"]})

    body = empty.json()
    assert empty.status_code == 200 and body["stored"] is None and body["problems"] == []
    assert body["effective"]["speed"] == 1.0
    assert tuple(body["effective"]["sensitive_topics"]) == DEFAULT_SENSITIVE_TOPICS
    policy = {row["field"]: row for row in body["policy"]}
    assert set(policy) == set(body["effective"])
    assert (policy["tone"]["adaptation"], policy["speed"]["adaptation"],
            policy["keyterms"]["adaptation"]) == ("replaced", "never", "merged")

    assert errors_at(refused) == {"speed", "tone", "colour", "fillers_enabled", "keyterms"}
    assert after_refusal["stored"] is None  # nothing half-stored

    assert put.status_code == 200
    assert put.json()["stored"] == {"speed": 0.8, "keyterms": ["Dr. Osei"]}
    assert patched.json()["stored"] == {"speed": 0.8, "keyterms": ["Dr. Osei"], "tone": "calm"}
    assert errors_at(bad_patch) == {"volume"}

    assert (profile.voice.speed, profile.voice.tone) == (0.8, "calm")
    assert profile.keyterms[:2] == ["MRI", "Dr. Osei"]  # service first, then workspace
    assert profile.settings_problems == []
    assert their_view["stored"] is None and their_view["effective"]["speed"] == 1.0
    assert anonymous.status_code == 401

    assert legacy["effective"]["keyterms"] == ["x" * 61] and legacy["problems"] == []
    assert blocked.status_code == 422
    assert [e["loc"][:2] for e in blocked.json()["detail"]] == [["stored", "keyterms"]]
    assert fixed.status_code == 200
    assert fixed.json()["stored"] == {"speed": 0.9, "keyterms": ["MRI"]}


async def test_service_keyterms_are_validated_merged_and_scoped(tmp_path, pg_dsn, db):
    workspace_id, mine = await workspace_with_key(db)
    _, theirs = await workspace_with_key(db)
    number = phone()
    service = await repo.create_service(db.pool, workspace_id, "Riverside", phone_number=number)
    await repo.set_voice_settings(db.pool, workspace_id, {"keyterms": ["physiotherapy", "MRI"]})
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn,
                        system_keyterms=["appointment", "mri"])
    url = f"/api/services/{service['id']}/keyterms"

    with app_in_testclient(settings) as client:
        listed = client.get("/api/services", headers=mine).json()
        their_list = client.get("/api/services", headers=theirs).json()
        too_long = client.put(url, headers=mine, json={"keyterms": ["x" * 61]})
        too_many = client.put(url, headers=mine, json={"keyterms": [f"t{i}" for i in range(101)]})
        blank = client.put(url, headers=mine, json={"keyterms": ["   "]})
        not_text = client.put(url, headers=mine, json={"keyterms": [7]})
        nul = client.put(url, headers=mine, json={"keyterms": ["MRI\u0000"]})
        stored = client.put(url, headers=mine,
                            json={"keyterms": ["Dr.  Osei", "dr. osei", "Mri scan"]})
        read = client.get(url, headers=mine)
        their_read = client.get(url, headers=theirs)
        their_write = client.put(url, headers=theirs, json={"keyterms": ["hijack"]})
        not_an_id = client.get("/api/services/not-a-uuid/keyterms", headers=mine)
        profile = next_call(client, number)

    assert listed == [{"id": service["id"], "name": "Riverside", "phone_numbers": [number],
                       "keyterms": [], "graph_id": "clinic_booking"}]
    assert service["id"] not in {s["id"] for s in their_list}
    for refused in (too_long, too_many, blank, not_text, nul):
        assert errors_at(refused) == {"keyterms"}
    assert stored.status_code == 200 and stored.json() == read.json()
    terms = read.json()
    assert terms["keyterms"] == ["Dr. Osei", "Mri scan"]
    assert terms["workspace_keyterms"] == ["physiotherapy", "MRI"]
    assert terms["effective"] == ["Dr. Osei", "Mri scan", "physiotherapy", "MRI", "appointment"]
    assert profile.keyterms == terms["effective"]
    assert their_read.status_code == their_write.status_code == not_an_id.status_code == 404
    keyterms = await db.pool.fetchval("SELECT keyterms FROM services WHERE id = $1",
                                      uuid.UUID(service["id"]))
    assert keyterms == ["Dr. Osei", "Mri scan"]


class BrokenEmbedder(LocalEmbedder):
    async def embed(self, texts):
        raise ConnectionError("embedding service down")


async def test_safety_concepts_are_embedded_on_create_and_guard_the_next_call(
        tmp_path, pg_dsn, db, writer):
    workspace_id, mine = await workspace_with_key(db)
    _, theirs = await workspace_with_key(db)
    number = phone()
    await repo.create_service(db.pool, workspace_id, "Riverside", phone_number=number)
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        runtime = client.app.state.runtime
        before = client.get("/api/safety-concepts", headers=mine).json()
        without = next_call(client, number)
        created = client.post("/api/safety-concepts", headers=mine, json=GAMBLING)
        again = client.post("/api/safety-concepts", headers=mine, json=GAMBLING)
        shadow = client.post("/api/safety-concepts", headers=mine,
                             json={**GAMBLING, "key": "self_harm"})
        invalid = client.post("/api/safety-concepts", headers=mine,
                              json={**GAMBLING, "key": "Bad Key", "examples": [],
                                    "severity": "medium", "crisis": True})
        nul = client.post("/api/safety-concepts", headers=mine,
                          json={**GAMBLING, "key": "nul", "examples": ["a\u0000b"]})
        working, runtime.safety.embedder = runtime.safety.embedder, BrokenEmbedder()
        try:
            unavailable = client.post("/api/safety-concepts", headers=mine,
                                      json={**GAMBLING, "key": "never_stored"})
        finally:
            runtime.safety.embedder = working
        listed = client.get("/api/safety-concepts", headers=mine).json()
        their_list = client.get("/api/safety-concepts", headers=theirs).json()
        guarded = next_call(client, number)
        vectors = await db.pool.fetchval(
            """SELECT count(*) FROM safety_concept_embeddings e JOIN safety_concepts c
                 ON c.id = e.concept_id WHERE c.workspace_id = $1""", uuid.UUID(workspace_id))
        their_delete = client.delete("/api/safety-concepts/gambling_crisis", headers=theirs)
        builtin_delete = client.delete("/api/safety-concepts/self_harm", headers=mine)
        deleted = client.delete("/api/safety-concepts/gambling_crisis", headers=mine)
        gone = client.delete("/api/safety-concepts/gambling_crisis", headers=mine)
        odd_key = client.delete("/api/safety-concepts/a%00b", headers=mine)
        after = next_call(client, number)

    defaults = {c.key for c in default_concepts()}
    assert len(before) == len(defaults) and all(c["builtin"] for c in before)
    assert {c["key"] for c in before} == defaults and without.safety_index is None

    assert created.status_code == 201, created.text
    concept = created.json()
    assert (concept["key"], concept["builtin"], concept["embedding_models"]) == (
        "gambling_crisis", False, [LOCAL_MODEL])
    assert again.status_code == shadow.status_code == 409
    assert errors_at(invalid) == {"key", "examples", "severity", "crisis"}
    assert errors_at(nul) == {"examples"}
    assert unavailable.status_code == 503
    assert [c["key"] for c in listed if not c["builtin"]] == ["gambling_crisis"]
    assert [c["key"] for c in their_list] == [c["key"] for c in before]
    assert vectors == 2  # one per example, and none for the refused one

    # The next call's monitor compares the caller's words with the new concept too.
    turn = LocalEmbedder().embed_now(["honestly I gambled away all my money"])[0]
    assessment = guarded.safety_index.assess(
        np.asarray(turn), escalate_at=settings.safety.escalate_similarity,
        candidate_at=settings.safety.candidate_similarity)
    assert assessment.escalate and assessment.escalate[0].concept.key == "gambling_crisis"
    assert assessment.escalate[0].concept.workspace_id == workspace_id
    benign = guarded.safety_index.assess(
        np.asarray(LocalEmbedder().embed_now(["can I book a cleaning on Tuesday"])[0]),
        escalate_at=settings.safety.escalate_similarity,
        candidate_at=settings.safety.candidate_similarity)
    assert not benign.escalate

    # The monitor itself, given that call's index, escalates the caller's words.
    session = make_session(writer, SessionMode.TEXT)
    monitor = SafetyMonitorProcessor(session, SafetyServices(LocalEmbedder(), RulesJudge()),
                            index=guarded.safety_index)
    down, _up = await run_test(monitor, frames_to_send=[
        TranscriptionFrame(text="I gambled away all my money", user_id="caller", timestamp=""),
        SleepFrame(sleep=0.3)])
    (record,) = writer.of_type("EscalationRecord")
    assert (record.concept, record.severity) == ("gambling_crisis", "soft")
    assert any(isinstance(f, LLMMessagesAppendFrame) for f in down)  # guidance, call goes on
    assert not session.conversation.suspended

    assert their_delete.status_code == 404 and builtin_delete.status_code == 409
    assert deleted.status_code == 204 and gone.status_code == odd_key.status_code == 404
    assert after.safety_index is None


async def escalation(db, call_id: str, seq: int, concept: str) -> int:
    async with db.pool.acquire() as conn:
        await write_records(conn, [EscalationRecord(call_id, seq, concept, "soft", 0.9, None,
                                                    "similarity above the threshold", 1000)])
    return await db.pool.fetchval(
        "SELECT id FROM escalations WHERE call_id = $1 AND seq = $2", uuid.UUID(call_id), seq)


async def new_call(db, workspace_id: str) -> str:
    return await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="in_progress")


async def test_escalations_are_listed_acknowledged_once_and_resolved(tmp_path, pg_dsn, db):
    workspace_id, mine = await workspace_with_key(db)
    other_id, theirs = await workspace_with_key(db)
    first_call, second_call = await new_call(db, workspace_id), await new_call(db, workspace_id)
    older = await escalation(db, first_call, 1, "gambling_crisis")
    newer = await escalation(db, second_call, 1, "self_harm")
    theirs_id = await escalation(db, await new_call(db, other_id), 1, "self_harm")
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        def act(escalation: int, action: str, operator: str, headers: dict = mine):
            return client.post(f"/api/escalations/{escalation}/{action}", headers=headers,
                               json={"operator": operator})

        listed = client.get("/api/escalations", headers=mine).json()
        acked = act(older, "acknowledge", "Nurse Ada")
        acked_again = act(older, "acknowledge", "Someone Else")
        no_operator = act(older, "acknowledge", "")
        nul_operator = act(older, "acknowledge", "Ada\u0000")
        open_now = client.get("/api/escalations?status=open", headers=mine).json()
        acknowledged = client.get("/api/escalations?status=acknowledged", headers=mine).json()
        resolved = act(newer, "resolve", "Dr. Osei")
        resolved_again = act(newer, "resolve", "Someone Else")
        ack_after_resolve = act(newer, "acknowledge", "Late")
        cross = act(theirs_id, "acknowledge", "Nurse Ada")
        cross_resolve = act(older, "resolve", "Intruder", headers=theirs)
        unknown = act(999999999, "resolve", "Nurse Ada")
        bad_status = client.get("/api/escalations?status=closed", headers=mine)
        their_list = client.get("/api/escalations", headers=theirs).json()

    assert [(e["id"], e["call_id"]) for e in listed] == [(newer, second_call), (older, first_call)]
    assert all(e["status"] == "open" and e["acknowledged_at"] is None for e in listed)
    first = acked.json()
    assert (first["status"], first["acknowledged_by"]) == ("acknowledged", "Nurse Ada")
    assert first["acknowledged_at"] is not None and first["resolved_at"] is None
    assert acked_again.json() == first  # idempotent: the first acknowledgement stands
    assert errors_at(no_operator) == errors_at(nul_operator) == {"operator"}
    assert [e["id"] for e in open_now] == [newer] and [e["id"] for e in acknowledged] == [older]
    closed = resolved.json()
    assert closed["status"] == "resolved" and closed["resolved_at"] is not None
    assert closed["acknowledged_by"] == "Dr. Osei"  # resolving an open one acknowledges it
    assert resolved_again.json() == closed == ack_after_resolve.json()
    assert cross.status_code == cross_resolve.status_code == unknown.status_code == 404
    assert errors_at(bad_status) == {"status"}
    assert [e["id"] for e in their_list] == [theirs_id]
    row = await db.pool.fetchrow("SELECT status, acknowledged_by FROM escalations WHERE id = $1",
                                 older)
    assert dict(row) == {"status": "acknowledged", "acknowledged_by": "Nurse Ada"}
