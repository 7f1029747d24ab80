"""Workspaces, API keys, voice settings, services and call records."""

import uuid

import pytest

from db import repositories as repo
from db.seed import DEMO_NUMBER, seed_demo


@pytest.fixture
async def workspace(db):
    return await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")


async def test_an_api_key_is_shown_once_and_stored_only_as_a_hash(db, workspace):
    key = await repo.create_api_key(db.pool, workspace["id"], "ops")
    assert key.startswith("vk_")
    stored = await db.pool.fetchval("SELECT key_hash FROM api_keys WHERE name = 'ops' AND workspace_id = $1", uuid.UUID(workspace["id"]))
    assert key not in stored and stored == repo.hash_api_key(key)
    assert await repo.verify_api_key(db.pool, key) == workspace["id"]


async def test_wrong_and_revoked_keys_are_refused(db, workspace):
    key = await repo.create_api_key(db.pool, workspace["id"])
    assert await repo.verify_api_key(db.pool, key + "x") is None
    assert await repo.revoke_api_key(db.pool, key)
    assert await repo.verify_api_key(db.pool, key) is None


async def test_voice_settings_round_trip_as_raw_json(db, workspace):
    assert await repo.get_voice_settings_raw(db.pool, workspace["id"]) is None
    await repo.set_voice_settings(db.pool, workspace["id"], {"speed": 1.1, "keyterms": ["MRI"]})
    assert await repo.get_voice_settings_raw(db.pool, workspace["id"]) == {"speed": 1.1, "keyterms": ["MRI"]}


async def test_the_demo_seed_is_idempotent_and_reachable_by_its_number(db):
    first = await seed_demo(db.pool)
    second = await seed_demo(db.pool)
    assert first == second
    service = await repo.find_service_by_phone(db.pool, DEMO_NUMBER)
    assert service["id"] == first.service_id and service["keyterms"]


async def test_calls_are_listed_newest_first_and_isolated_by_workspace(db, workspace):
    other = await repo.create_workspace(db.pool, f"other-{uuid.uuid4().hex[:8]}")
    ids = [
        await repo.create_call(
            db.pool, workspace_id=workspace["id"], service_id=None, call_sid=None,
            direction="inbound", from_number="+15550100123", to_number=DEMO_NUMBER, status="ringing",
        )
        for _ in range(3)
    ]
    listed = await repo.list_calls(db.pool, workspace["id"], limit=10)
    assert [c["id"] for c in listed] == list(reversed(ids))
    assert await repo.list_calls(db.pool, other["id"]) == []
    assert await repo.get_call_detail(db.pool, ids[0], other["id"]) is None


async def test_call_detail_carries_its_children_and_updates_are_allow_listed(db, workspace):
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace["id"], service_id=None, call_sid=f"CA{uuid.uuid4().hex}",
        direction="inbound", from_number=None, to_number=None, status="ringing",
    )
    await repo.update_call(db.pool, call_id, status="completed", completion_reason="caller_hangup")
    with pytest.raises(ValueError, match="not updatable"):
        await repo.update_call(db.pool, call_id, workspace_id=None)
    detail = await repo.get_call_detail(db.pool, call_id, workspace["id"])
    assert detail["completion_reason"] == "caller_hangup"
    assert detail["turns"] == [] and detail["events"] == [] and detail["tool_calls"] == []


async def test_ids_that_are_not_uuids_match_nothing(db, workspace):
    assert await repo.get_call(db.pool, "not-a-uuid") is None
    assert await repo.get_call_detail(db.pool, "'; drop table calls; --", workspace["id"]) is None
