"""The calls history and detail over HTTP: auth, workspace isolation, cursor pages, every
filter, and a detail with its children and derived safety state."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from api.calls import safety_state
from db import repositories as repo
from tests.api.app_client import bearer, running_app

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def insert_call(db, workspace_id: str, started_at: datetime, **columns) -> str:
    """A call row as the writer leaves it, at a chosen start time."""
    fields = {"workspace_id": uuid.UUID(workspace_id), "direction": "inbound",
              "status": "completed", "started_at": started_at, **columns}
    names = ", ".join(fields)
    marks = ", ".join(f"${i}" for i in range(1, len(fields) + 1))
    return str(await db.pool.fetchval(
        f"INSERT INTO calls ({names}) VALUES ({marks}) RETURNING id", *fields.values()))


async def add_escalation(db, call_id: str, seq: int, severity: str, status: str = "open") -> None:
    await db.pool.execute(
        "INSERT INTO escalations (call_id, seq, concept, severity, status) "
        "VALUES ($1, $2, 'self_harm', $3, $4)", uuid.UUID(call_id), seq, severity, status)


async def add_tool_call(db, call_id: str, error_class: str | None) -> None:
    await db.pool.execute(
        "INSERT INTO tool_calls (call_id, tool_call_id, name, succeeded, error_class) "
        "VALUES ($1, $2, 'book', $3, $4)",
        uuid.UUID(call_id), uuid.uuid4().hex, error_class is None, error_class)


@pytest.fixture
async def key(db, workspace_id) -> str:
    return await repo.create_api_key(db.pool, workspace_id, "test")


async def test_missing_wrong_and_revoked_keys_are_refused(db, settings, workspace_id, key):
    revoked = await repo.create_api_key(db.pool, workspace_id, "old")
    assert await repo.revoke_api_key(db.pool, revoked)
    async with running_app(settings) as (_, client):
        missing = await client.get("/api/calls")
        wrong = await client.get("/api/calls", headers=bearer(key[:-2] + "zz"))
        refused = await client.get("/api/calls", headers=bearer(revoked))
        basic = await client.get("/api/calls", headers={"Authorization": f"Basic {key}"})
        ok = await client.get("/api/calls", headers=bearer(key))

    assert [r.status_code for r in (missing, wrong, refused, basic)] == [401] * 4
    assert all(r.headers["www-authenticate"] == "Bearer" for r in (missing, wrong, refused))
    assert ok.status_code == 200 and ok.json() == {"calls": [], "next_cursor": None}


async def test_another_workspaces_key_sees_neither_the_call_nor_it_in_the_list(
        db, settings, workspace_id, key):
    call_id = await insert_call(db, workspace_id, T0)
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other_key = await repo.create_api_key(db.pool, other["id"], "other")
    await insert_call(db, other["id"], T0)
    async with running_app(settings) as (_, client):
        theirs = await client.get(f"/api/calls/{call_id}", headers=bearer(other_key))
        their_list = await client.get("/api/calls", headers=bearer(other_key))
        mine = await client.get(f"/api/calls/{call_id}", headers=bearer(key))
        not_uuid = await client.get("/api/calls/not-a-uuid", headers=bearer(key))
        unknown = await client.get(f"/api/calls/{uuid.uuid4()}", headers=bearer(key))

    assert theirs.status_code == not_uuid.status_code == unknown.status_code == 404
    assert call_id not in {c["id"] for c in their_list.json()["calls"]}
    assert len(their_list.json()["calls"]) == 1
    assert mine.status_code == 200 and mine.json()["id"] == call_id


async def test_cursor_pages_hold_every_call_once_in_order_even_as_calls_arrive(
        db, settings, workspace_id, key):
    # 25 calls: groups of five share a start time (the id breaks the tie), the rest apart.
    starts = [T0 - timedelta(minutes=i // 5) for i in range(15)]
    starts += [T0 - timedelta(hours=1, minutes=i) for i in range(10)]
    ids = [await insert_call(db, workspace_id, at) for at in starts]
    expected = [call_id for _, call_id in sorted(
        zip(starts, (uuid.UUID(i) for i in ids), strict=True), reverse=True)]
    seen: list[str] = []
    async with running_app(settings) as (_, client):
        cursor = None
        for page_number in range(5):
            params = {"limit": 10, **({"cursor": cursor} if cursor else {})}
            page = (await client.get("/api/calls", params=params, headers=bearer(key))).json()
            seen += [c["id"] for c in page["calls"]]
            cursor = page["next_cursor"]
            if page_number == 0:  # a newer call arriving mid-walk must not shift later pages
                await insert_call(db, workspace_id, T0 + timedelta(minutes=5))
            if cursor is None:
                break
        tampered = cursor_with_a_changed_character(first_cursor := (await client.get(
            "/api/calls", params={"limit": 10}, headers=bearer(key))).json()["next_cursor"])
        altered = await client.get("/api/calls", params={"cursor": tampered},
                                   headers=bearer(key))
        garbage = await client.get("/api/calls", params={"cursor": "%%%not-base64"},
                                   headers=bearer(key))
        other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
        other_key = await repo.create_api_key(db.pool, other["id"], "other")
        foreign = await client.get("/api/calls", params={"cursor": first_cursor},
                                   headers=bearer(other_key))
        too_many = await client.get("/api/calls", params={"limit": 201}, headers=bearer(key))

    assert seen == [str(i) for i in expected]
    assert page_number == 2 and cursor is None
    assert altered.status_code == garbage.status_code == foreign.status_code == 400
    assert too_many.status_code == 422


def cursor_with_a_changed_character(cursor: str) -> str:
    middle = len(cursor) // 2
    return cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1:]


async def test_each_filter_narrows_the_history(db, settings, workspace_id, key):
    plain = await insert_call(db, workspace_id, T0 - timedelta(days=3),
                              final_state="goodbye", completion_reason="caller_hangup")
    escalated = await insert_call(db, workspace_id, T0 - timedelta(days=2),
                                  final_state="safety_escalation", status="in_progress")
    await add_escalation(db, escalated, 1, "hard")
    guarded = await insert_call(db, workspace_id, T0 - timedelta(days=1),
                                completion_reason="agent_goodbye")
    await add_tool_call(db, guarded, "guard")
    await add_tool_call(db, guarded, None)
    pms = await insert_call(db, workspace_id, T0, completion_reason="agent_goodbye")
    await add_tool_call(db, pms, "pms")
    await add_tool_call(db, plain, None)

    async def ids(**params) -> list[str]:
        response = await client.get("/api/calls", params=params, headers=bearer(key))
        assert response.status_code == 200, response.text
        return [c["id"] for c in response.json()["calls"]]

    async with running_app(settings) as (_, client):
        assert await ids() == [pms, guarded, escalated, plain]
        assert await ids(started_after=(T0 - timedelta(days=2)).isoformat()) == [
            pms, guarded, escalated]
        assert await ids(started_before=(T0 - timedelta(days=1)).isoformat()) == [
            escalated, plain]
        assert await ids(state="goodbye") == [plain]
        assert await ids(status="in_progress") == [escalated]
        assert await ids(completion_reason="agent_goodbye") == [pms, guarded]
        assert await ids(escalated="true") == [escalated]
        assert await ids(escalated="false") == [pms, guarded, plain]
        assert await ids(tool_error="true") == [pms, guarded]
        assert await ids(tool_error="false") == [escalated, plain]
        assert await ids(tool_error="guard") == [guarded]
        assert await ids(tool_error="pms", completion_reason="agent_goodbye") == [pms]
        assert await ids(tool_error="other") == []
        listed = (await client.get("/api/calls", headers=bearer(key))).json()["calls"]
        bad = await client.get("/api/calls", params={"tool_error": "maybe"}, headers=bearer(key))
        bad_time = await client.get("/api/calls", params={"started_after": "yesterday"},
                                    headers=bearer(key))

    by_id = {c["id"]: c for c in listed}
    assert (by_id[guarded]["tool_errors"], by_id[escalated]["escalated"]) == (1, True)
    assert bad.status_code == bad_time.status_code == 422


async def test_the_detail_carries_children_verification_and_safety(db, settings, workspace_id, key):
    call_id = await insert_call(
        db, workspace_id, T0, final_state="safety_escalation",
        config_snapshot={"providers": {"stt": "local"}},
        emotional_summary={"dominant": "Fear"}, verified_transcript="hello there",
        verified_words=[{"word": "hello", "start_ms": 0, "end_ms": 300, "speaker": "caller"}],
        transcript_accuracy=0.9, transcript_verifier="local")
    await db.pool.execute(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text, user_speech_start_ms,"
        " user_speech_end_ms, engine_ms, nav_ms, render_ms, audio_ttfb_ms, words) VALUES "
        "($1, 1, 'caller', 'caller', 'hello there', 0, 600, 20, 5, 30, 180, $2)",
        uuid.UUID(call_id), [{"word": "hello", "start_ms": 0, "end_ms": 300}])
    await db.pool.execute(
        "INSERT INTO state_transitions (call_id, seq, previous_state, next_state) "
        "VALUES ($1, 1, 'greeting', 'safety_escalation')", uuid.UUID(call_id))
    await db.pool.execute(
        "INSERT INTO call_events (call_id, seq, type, data) VALUES ($1, 1, 'agent_suspended', $2)",
        uuid.UUID(call_id), {"concept": "self_harm"})
    await add_escalation(db, call_id, 1, "soft", "resolved")
    await add_escalation(db, call_id, 2, "hard")
    await add_tool_call(db, call_id, "other")
    async with running_app(settings) as (_, client):
        detail = (await client.get(f"/api/calls/{call_id}", headers=bearer(key))).json()

    [turn] = detail["turns"]
    assert (turn["render_ms"], turn["audio_ttfb_ms"]) == (30, 180)
    assert turn["words"][0]["word"] == "hello"
    assert detail["transitions"][0]["next_state"] == "safety_escalation"
    assert detail["tool_calls"][0]["error_class"] == "other"
    assert detail["events"][0]["type"] == "agent_suspended"
    assert [e["severity"] for e in detail["escalations"]] == ["soft", "hard"]
    assert detail["safety"]["status"] == "suspended" and detail["safety"]["needs_operator"]
    assert detail["config_snapshot"] == {"providers": {"stt": "local"}}
    assert detail["emotional_summary"] == {"dominant": "Fear"}
    assert (detail["verified_transcript"], detail["transcript_accuracy"]) == ("hello there", 0.9)
    assert detail["verified_words"][0]["speaker"] == "caller"


async def test_a_recording_is_shown_by_its_url_never_by_the_servers_path(
        db, settings, workspace_id, key):
    recorded = await insert_call(db, workspace_id, T0,
                                 recording_path="/srv/clinic/data/recordings/x.wav")
    text_only = await insert_call(db, workspace_id, T0 + timedelta(seconds=1))
    async with running_app(settings) as (_, client):
        listed = (await client.get("/api/calls", headers=bearer(key))).json()["calls"]
        detail = (await client.get(f"/api/calls/{recorded}", headers=bearer(key))).json()
        spec = (await client.get("/openapi.json")).text

    by_id = {c["id"]: c for c in listed}
    for call in (by_id[recorded], detail):
        assert "recording_path" not in call and "/srv/clinic" not in str(call)
        assert call["has_recording"] is True
        assert call["recording_url"] == f"/api/calls/{recorded}/recording/stereo"
    assert by_id[text_only]["has_recording"] is False and by_id[text_only]["recording_url"] is None
    assert "recording_path" not in spec


def escalation(severity: str, status: str, concept: str = "c") -> dict:
    return {"severity": severity, "status": status, "concept": concept}


@pytest.mark.parametrize(("escalations", "events", "expected", "operator"), [
    ([], [], "clear", False),
    ([escalation("soft", "open")], [], "flagged", False),
    ([escalation("hard", "open")], [], "suspended", True),
    ([escalation("hard", "acknowledged"), escalation("hard", "resolved")], [],
     "acknowledged", False),
    ([escalation("hard", "resolved"), escalation("soft", "open")], [], "resolved", False),
    ([], [{"type": "agent_suspended"}], "suspended", True),
])
def test_safety_state_follows_the_hard_escalations(escalations, events, expected, operator):
    state = safety_state(escalations, events)
    assert (state.status, state.needs_operator) == (expected, operator)
    assert state.agent_suspended == (expected in ("suspended", "acknowledged", "resolved"))


async def test_a_nul_in_a_text_filter_is_refused_not_a_server_error(db, settings, workspace_id,
                                                                    key):
    await insert_call(db, workspace_id, T0, final_state="closing")
    async with running_app(settings) as (_, client):
        refused = [await client.get(f"/api/calls?{name}=a%00b", headers=bearer(key))
                   for name in ("state", "status", "completion_reason")]
        fine = await client.get("/api/calls?state=closing", headers=bearer(key))
    assert [r.status_code for r in refused] == [422] * 3
    assert fine.status_code == 200 and len(fine.json()["calls"]) == 1
