"""The audit log: each admin change over the API leaves exactly one row naming the key,
what changed, and the state before and after (never a key's secret); `GET /api/audit`
reads them newest first, a page at a time, and only the workspace's own."""

from __future__ import annotations

import uuid

from api.deps import Role
from db import repositories as repo
from tests.api.app_client import bearer, running_app
from tests.api.test_roles import workspace_with_keys

CONCEPT = {
    "key": "gambling_crisis", "name": "Gambling crisis", "severity": "soft",
    "description": "The caller says gambling has put them in danger.",
    "examples": ["I gambled away all my money"],
}


async def test_each_admin_change_leaves_one_audit_row_with_before_and_after(settings, db):
    workspace_id, keys = await workspace_with_keys(db)
    _, theirs = await workspace_with_keys(db)
    service = await repo.create_service(db.pool, workspace_id, "Riverside",
                                        phone_number=f"+1555{uuid.uuid4().int % 10**7:07d}",
                                        keyterms=["MRI"])
    admin = bearer(keys[Role.ADMIN])
    actor = f"key vk_{keys[Role.ADMIN].split('_')[1]}"
    new_name = f"branch-{uuid.uuid4().hex[:8]}"
    steps = [
        ("PUT", "/api/voice-settings", {"speed": 0.8}),
        ("PATCH", "/api/voice-settings", {"tone": "calm"}),
        ("POST", "/api/safety-concepts", CONCEPT),
        ("DELETE", "/api/safety-concepts/gambling_crisis", None),
        ("PUT", f"/api/services/{service['id']}/keyterms", {"keyterms": ["Dr. Osei"]}),
        ("POST", "/api/keys", {"name": "desk", "role": "operator"}),
        ("DELETE", "/api/keys/{desk}", None),
        ("POST", "/api/workspaces", {"name": new_name}),
    ]
    rows_after_each, created = [], {}
    async with running_app(settings) as (_, client):
        for method, path, body in steps:
            answer = await client.request(method, path.format(**created), json=body,
                                          headers=admin)
            assert answer.status_code < 300, (method, path, answer.text)
            if path == "/api/keys":
                created["desk"] = answer.json()["id"]
                desk_prefix = answer.json()["prefix"]
            rows_after_each.append(len((await client.get(
                "/api/audit", params={"limit": 200}, headers=admin)).json()["entries"]))
        page = (await client.get("/api/audit", headers=admin)).json()
        their_page = (await client.get("/api/audit", headers=bearer(theirs[Role.ADMIN]))).json()
        refused = await client.get("/api/audit", headers=bearer(keys[Role.OPERATOR]))
        failed = await client.post("/api/workspaces", json={"name": new_name}, headers=admin)
        after_failure = (await client.get("/api/audit", headers=admin)).json()

    assert rows_after_each == list(range(1, len(steps) + 1))  # one row per change
    entries = list(reversed(page["entries"]))  # oldest first, as the steps ran
    assert all(entry["actor"] == actor for entry in entries)
    summary = [(e["action"], e["target"], e["before"], e["after"]) for e in entries]
    new_workspace = entries[-1]["target"]
    assert summary == [
        ("voice_settings.replace", "voice settings", None, {"speed": 0.8}),
        ("voice_settings.update", "voice settings", {"speed": 0.8},
         {"speed": 0.8, "tone": "calm"}),
        ("safety_concept.create", "gambling_crisis", None, CONCEPT),
        ("safety_concept.delete", "gambling_crisis", CONCEPT, None),
        ("keyterms.replace", service["id"], ["MRI"], ["Dr. Osei"]),
        ("api_key.create", f"vk_{desk_prefix}", None,
         {"name": "desk", "prefix": desk_prefix, "role": "operator"}),
        ("api_key.revoke", f"vk_{desk_prefix}",
         {"name": "desk", "prefix": desk_prefix, "role": "operator"}, None),
        ("workspace.create", new_workspace, None, {"id": new_workspace, "name": new_name}),
    ]
    assert page["next_before"] is None
    assert their_page == {"entries": [], "next_before": None}
    assert refused.status_code == 403
    assert failed.status_code == 409 and after_failure == page  # a refused change: no row


async def test_the_audit_log_pages_back_newest_first(settings, db):
    _, keys = await workspace_with_keys(db)
    admin = bearer(keys[Role.ADMIN])
    async with running_app(settings) as (_, client):
        for speed in (0.7, 0.8, 0.9):
            await client.put("/api/voice-settings", json={"speed": speed}, headers=admin)
        first = (await client.get("/api/audit", params={"limit": 2}, headers=admin)).json()
        second = (await client.get("/api/audit", params={
            "limit": 2, "before": first["next_before"]}, headers=admin)).json()
        bad = await client.get("/api/audit", params={"limit": 0}, headers=admin)

    speeds = [entry["after"]["speed"] for entry in first["entries"] + second["entries"]]
    assert speeds == [0.9, 0.8, 0.7]
    assert first["next_before"] == first["entries"][-1]["id"]
    assert second["next_before"] is None
    assert bad.status_code == 422
