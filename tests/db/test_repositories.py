"""Workspaces, API keys, voice settings, services and call records, as the API sees them."""

import asyncio
import uuid
from datetime import datetime

import asyncpg
import pytest

from db import repositories as repo


async def new_workspace(db) -> str:
    return (await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}"))["id"]


async def new_call(db, workspace_id: str, **overrides) -> str:
    fields = dict(
        workspace_id=workspace_id, service_id=None, call_sid=None, direction="inbound",
        from_number="+15550100123", to_number="+15550100100", status="ringing",
    )
    return await repo.create_call(db.pool, **(fields | overrides))


# --- Workspaces ------------------------------------------------------------------


async def test_ensure_workspace_creates_once_then_finds_the_same_one(db):
    name = f"clinic-{uuid.uuid4().hex[:8]}"

    first = await repo.ensure_workspace(db.pool, name)
    second = await repo.ensure_workspace(db.pool, name)

    assert first["id"] == second["id"] == (await repo.get_workspace_by_name(db.pool, name))["id"]
    assert isinstance(first["created_at"], str)


async def test_a_workspace_name_is_unique(db):
    name = f"dup-{uuid.uuid4().hex[:8]}"
    await repo.create_workspace(db.pool, name)

    with pytest.raises(asyncpg.UniqueViolationError):
        await repo.create_workspace(db.pool, name)


# --- API keys --------------------------------------------------------------------


async def test_an_api_key_is_shown_once_and_stored_only_as_its_sha256(db, workspace_id):
    key = await repo.create_api_key(db.pool, workspace_id, "ops")

    stored = await db.pool.fetchrow(
        "SELECT prefix, key_hash FROM api_keys WHERE workspace_id = $1::uuid", workspace_id
    )
    _, prefix, secret = key.split("_", 2)
    assert key.startswith("vk_") and len(prefix) == 8 and len(secret) >= 32
    assert stored["prefix"] == prefix and stored["key_hash"] == repo.hash_api_key(key)
    assert secret not in stored["key_hash"]


async def test_verifying_a_key_names_its_workspace_and_marks_it_used(db, workspace_id):
    key = await repo.create_api_key(db.pool, workspace_id)

    verified = await repo.verify_api_key(db.pool, key)

    last_used = await db.pool.fetchval(
        "SELECT last_used_at FROM api_keys WHERE key_hash = $1", repo.hash_api_key(key)
    )
    assert verified == workspace_id and last_used is not None


async def test_wrong_malformed_and_revoked_keys_are_refused(db, workspace_id):
    key = await repo.create_api_key(db.pool, workspace_id)

    wrong = await repo.verify_api_key(db.pool, key[:-1] + ("A" if key[-1] != "A" else "B"))
    malformed = await repo.verify_api_key(db.pool, "vk_nope")
    revoked_now = await repo.revoke_api_key(db.pool, key)
    revoked_again = await repo.revoke_api_key(db.pool, key)
    after_revoke = await repo.verify_api_key(db.pool, key)

    assert wrong is None and malformed is None
    assert revoked_now and not revoked_again
    assert after_revoke is None


# --- Voice settings --------------------------------------------------------------


async def test_voice_settings_round_trip_as_raw_json_and_can_be_replaced(db, workspace_id):
    unset = await repo.get_voice_settings_raw(db.pool, workspace_id)
    await repo.set_voice_settings(db.pool, workspace_id, {"speed": 1.1, "keyterms": ["MRI"]})
    first = await repo.get_voice_settings_raw(db.pool, workspace_id)
    await repo.set_voice_settings(db.pool, workspace_id, {"speed": "fast"})  # parsed elsewhere
    second = await repo.get_voice_settings_raw(db.pool, workspace_id)

    assert unset is None
    assert first == {"speed": 1.1, "keyterms": ["MRI"]}
    assert second == {"speed": "fast"}


async def test_voice_settings_of_a_malformed_workspace_id_are_simply_absent(db):
    assert await repo.get_voice_settings_raw(db.pool, "not-a-uuid") is None


# --- Services --------------------------------------------------------------------


async def test_a_service_is_found_by_its_number_and_the_oldest_is_the_default(db, workspace_id):
    number = f"+1555010{2000 + uuid.uuid4().int % 8000}"  # fictional, never the demo's
    first = await repo.create_service(db.pool, workspace_id, "Main line", phone_number=number,
                                      keyterms=["podiatry"], greeting="Hello!")
    await repo.create_service(db.pool, workspace_id, "Second line")

    found = await repo.find_service_by_phone(db.pool, number)
    default = await repo.default_service(db.pool, workspace_id)

    assert found["id"] == first["id"] and found["keyterms"] == ["podiatry"]
    assert default["id"] == first["id"]
    assert await repo.find_service_by_phone(db.pool, "+15550109999") is None


# --- Calls -----------------------------------------------------------------------


async def test_a_call_is_created_found_by_sid_and_updated_through_the_allow_list(db, workspace_id):
    sid = f"CA{uuid.uuid4().hex}"
    call_id = await new_call(db, workspace_id, call_sid=sid, config_snapshot={"llm": "local"})

    updated = await repo.update_call(
        db.pool, call_id, status="completed", completion_reason="caller_hangup",
        ended_at=datetime.now().astimezone(), duration_s=12.5,
    )
    call = await repo.get_call(db.pool, call_id)

    assert updated
    assert (await repo.find_call_by_sid(db.pool, sid))["id"] == call_id
    assert call["status"] == "completed" and call["duration_s"] == 12.5
    assert call["config_snapshot"] == {"llm": "local"}
    assert isinstance(call["ended_at"], str) and datetime.fromisoformat(call["ended_at"])


async def test_updating_a_column_outside_the_allow_list_is_refused(db, workspace_id):
    call_id = await new_call(db, workspace_id)

    with pytest.raises(ValueError, match="not updatable"):
        await repo.update_call(db.pool, call_id, workspace_id=None)


async def test_updating_an_unknown_call_reports_false(db):
    assert not await repo.update_call(db.pool, str(uuid.uuid4()), status="completed")


async def test_calls_are_listed_newest_first_and_page_back_with_a_cursor(db, workspace_id):
    ids = [await new_call(db, workspace_id) for _ in range(3)]

    everything = await repo.list_calls(db.pool, workspace_id, limit=10)
    first_page = await repo.list_calls(db.pool, workspace_id, limit=2)
    last = first_page[-1]
    older = await repo.list_calls(db.pool, workspace_id, limit=2, cursor=repo.CallCursor(
        datetime.fromisoformat(last["started_at"]), uuid.UUID(last["id"])))

    assert [c["id"] for c in everything] == list(reversed(ids))
    assert [c["id"] for c in first_page + older] == list(reversed(ids))
    assert everything[0]["turn_count"] == 0


def test_a_cursor_with_non_ascii_text_is_invalid_not_an_error():
    import base64

    token = base64.urlsafe_b64encode("2026-01-01T00:00:00+00:00|x|\u00e9".encode()).decode()

    with pytest.raises(repo.InvalidCursor):
        repo.decode_cursor(str(uuid.uuid4()), token)


async def test_a_workspace_never_sees_another_workspaces_calls(db, workspace_id):
    other = await new_workspace(db)
    call_id = await new_call(db, workspace_id)

    assert await repo.list_calls(db.pool, other) == []
    assert await repo.get_call_detail(db.pool, call_id, other) is None
    assert await repo.get_call_detail(db.pool, call_id, workspace_id) is not None


async def test_call_detail_carries_its_children_in_sequence_order(db, workspace_id):
    call_id = await new_call(db, workspace_id)
    for seq, role in ((2, "agent"), (1, "caller")):
        await db.pool.execute(
            "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) "
            "VALUES ($1::uuid, $2, $3, $3, 'hello')", call_id, seq, role,
        )
    await db.pool.execute(
        "INSERT INTO state_transitions (call_id, seq, previous_state, next_state) "
        "VALUES ($1::uuid, 1, NULL, 'greeting')", call_id,
    )
    await db.pool.execute(
        "INSERT INTO tool_calls (call_id, tool_call_id, name, input, started_ms) "
        "VALUES ($1::uuid, 'tc-1', 'find_slots', $2, 900)", call_id, {"day": "monday"},
    )
    await db.pool.execute(
        "INSERT INTO call_events (call_id, seq, type, data) VALUES ($1::uuid, 1, 'started', $2)",
        call_id, {"mode": "phone"},
    )

    detail = await repo.get_call_detail(db.pool, call_id, workspace_id)

    assert [turn["seq"] for turn in detail["turns"]] == [1, 2]
    assert detail["turns"][0]["speaker_role"] == "caller" and "call_id" not in detail["turns"][0]
    assert detail["transitions"][0]["next_state"] == "greeting"
    assert detail["tool_calls"][0]["input"] == {"day": "monday"}
    assert detail["events"] == [{"seq": 1, "type": "started", "data": {"mode": "phone"},
                                 "at_ms": None}]


async def test_ids_that_are_not_uuids_match_nothing(db, workspace_id):
    assert await repo.get_call(db.pool, "not-a-uuid") is None
    assert await repo.get_call_detail(db.pool, "'; drop table calls; --", workspace_id) is None
    assert await repo.list_calls(db.pool, "nope") == []


async def test_deleting_a_workspace_removes_its_calls_and_their_records(db):
    workspace_id = await new_workspace(db)
    call_id = await new_call(db, workspace_id)
    await db.pool.execute(
        "INSERT INTO call_events (call_id, seq, type) VALUES ($1::uuid, 1, 'started')", call_id
    )

    await db.pool.execute("DELETE FROM workspaces WHERE id = $1::uuid", workspace_id)

    assert await repo.get_call(db.pool, call_id) is None
    assert await db.pool.fetchval(
        "SELECT count(*) FROM call_events WHERE call_id = $1::uuid", call_id
    ) == 0


async def test_only_one_media_stream_can_claim_a_ringing_call(db):
    call_id = await new_call(db, await new_workspace(db))

    first, second = await asyncio.gather(
        repo.claim_call_for_stream(db.pool, call_id), repo.claim_call_for_stream(db.pool, call_id)
    )

    assert [c is not None for c in (first, second)].count(True) == 1
    assert (await repo.get_call(db.pool, call_id))["connected_at"] is not None
    assert await repo.claim_call_for_stream(db.pool, str(uuid.uuid4())) is None
