"""Roles over the real app: each route refuses a key whose role is below the one it
declares (403 naming both roles) and changes nothing; observer sockets refuse a read-only
key; each role reaches what it may; keys are made with a role (read-only unless named).

The refusals are generic over the route table (`tests/api/route_table.py`), so a route
added later is covered the day it is mounted."""

from __future__ import annotations

import uuid

import pytest
from starlette.websockets import WebSocketDisconnect

from api.deps import Role
from config import Settings
from db import repositories as repo
from tests.api.app_client import app_in_testclient, bearer, running_app
from tests.api.route_table import MUTATING, api_routes

# Written on their own while the app runs: process heartbeats, the search index of
# patients earlier tests left unembedded, and when a key was last used.
VOLATILE_TABLES = frozenset({"service_instances", "world_embeddings"})
VOLATILE_COLUMNS = ("last_used_at", "heartbeat_at")
RANK = [Role.READ_ONLY, Role.OPERATOR, Role.ADMIN]


def quiet_settings(tmp_path, pg_dsn) -> Settings:
    """No sweeper pass and no durable jobs (a reminder sweep, a waitlist offer) while a
    test compares the database before and after."""
    return Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn,
                    call_sweep_interval_s=600, api_rate_limit_per_minute=100_000,
                    job_worker_enabled=False)


async def workspace_with_keys(db) -> tuple[str, dict[Role, str]]:
    """A new workspace and one key of each role."""
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    keys = {role: await repo.create_api_key(db.pool, workspace["id"], f"{role} key", role=role)
            for role in Role}
    return workspace["id"], keys


async def database_fingerprint(pool) -> dict[str, str]:
    """A digest of every table's rows (less what changes by itself while the app runs)."""
    tables = [row["tablename"] for row in await pool.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
    volatile = "ARRAY[" + ", ".join(f"'{c}'" for c in VOLATILE_COLUMNS) + "]"
    digests = {}
    for table in tables:
        if table in VOLATILE_TABLES:
            continue
        row = f"(to_jsonb(t) - {volatile})::text"
        digests[table] = await pool.fetchval(
            f'SELECT md5(coalesce(string_agg({row}, \'|\' ORDER BY {row}), \'\')) '
            f'FROM "{table}" t')
    return digests


def concrete(path: str) -> str:
    """`path` with each parameter given a syntactically valid id."""
    parts = [str(uuid.uuid4()) if part.startswith("{") else part for part in path.split("/")]
    return "/".join(parts)


def detail(answer) -> object:
    """The `detail` of an error answer (None for anything else)."""
    body = answer.json() if answer.content else None
    return body.get("detail") if isinstance(body, dict) else None


def below(role: Role) -> list[Role]:
    return RANK[:RANK.index(role)]


async def test_a_read_only_key_is_refused_every_change_and_nothing_changes(
        tmp_path, pg_dsn, db):
    _, keys = await workspace_with_keys(db)
    async with running_app(quiet_settings(tmp_path, pg_dsn)) as (app, client):
        changes = [route for route in api_routes(app) if route.method in MUTATING]
        await client.get("/api/me", headers=bearer(keys[Role.READ_ONLY]))  # key proven once
        before = await database_fingerprint(db.pool)
        answers = {route.label: await client.request(
            route.method, concrete(route.path), json={}, headers=bearer(keys[Role.READ_ONLY]))
            for route in changes}
        after = await database_fingerprint(db.pool)

    assert len(changes) >= 10  # the table was walked, not an empty list
    refused = {label: (answer.status_code, detail(answer)) for label, answer in answers.items()}
    assert {label: status for label, (status, _) in refused.items()} == \
        {label: 403 for label in refused}
    assert all(str(reason).startswith("this key's role (read_only) cannot do this; it needs ")
               for _, reason in refused.values()), refused
    assert after == before


async def test_each_route_refuses_the_roles_below_the_one_it_declares(tmp_path, pg_dsn, db):
    _, keys = await workspace_with_keys(db)
    async with running_app(quiet_settings(tmp_path, pg_dsn)) as (app, client):
        routes = [route for route in api_routes(app) if route.method != "WS"]
        answers = {(route.label, role): await client.request(
            route.method, concrete(route.path), json={}, headers=bearer(keys[role]))
            for route in routes for role in below(route.role)}

    admin_routes = {route.label for route in routes if route.role is Role.ADMIN}
    assert {"GET /api/keys", "PUT /api/voice-settings", "GET /api/audit"} <= admin_routes
    assert {(label, role) for label, role in answers if role is Role.OPERATOR} == \
        {(label, Role.OPERATOR) for label in admin_routes}
    refused = {(label, role): (answer.status_code, detail(answer))
               for (label, role), answer in answers.items()}
    needs = {route.label: route.role for route in routes}
    assert refused == {
        (label, role): (403, f"this key's role ({role}) cannot do this; it needs {needs[label]}")
        for label, role in refused}


@pytest.mark.usefixtures("worker_pools_started")
async def test_observer_sockets_refuse_a_key_below_their_role_with_the_reason(
        tmp_path, pg_dsn, db):
    _, keys = await workspace_with_keys(db)
    settings = quiet_settings(tmp_path, pg_dsn)
    refusals, admitted = {}, None
    with app_in_testclient(settings) as client:
        sockets = [route for route in api_routes(client.app) if route.method == "WS"]
        for route in sockets:
            for role in below(route.role):
                with (client.websocket_connect(concrete(route.path),
                                               headers=bearer(keys[role])) as ws,
                      pytest.raises(WebSocketDisconnect) as closed):
                    ws.receive_text()
                refusals[(route.path, role)] = (closed.value.code, closed.value.reason)
        # An operator is let past the role check: an unknown call is the next refusal.
        with (client.websocket_connect(concrete("/api/calls/{call_id}/observe"),
                                       headers=bearer(keys[Role.OPERATOR])) as ws,
              pytest.raises(WebSocketDisconnect) as closed):
            ws.receive_text()
        admitted = closed.value.reason

    assert {path for path, _ in refusals} == {"/api/observe", "/api/calls/{call_id}/observe"}
    assert set(refusals.values()) == {
        (1008, "this key's role (read_only) cannot do this; it needs operator")}
    assert admitted == "unknown call"


async def test_each_role_reaches_what_it_may(tmp_path, pg_dsn, db):
    workspace_id, keys = await workspace_with_keys(db)
    async with running_app(quiet_settings(tmp_path, pg_dsn)) as (_, client):
        history = await client.get("/api/calls", headers=bearer(keys[Role.READ_ONLY]))
        settings = await client.get("/api/voice-settings", headers=bearer(keys[Role.READ_ONLY]))
        escalations = await client.get("/api/escalations", headers=bearer(keys[Role.OPERATOR]))
        queue = await client.get("/api/review-queue", headers=bearer(keys[Role.OPERATOR]))
        admin_history = await client.get("/api/calls", headers=bearer(keys[Role.ADMIN]))
        changed = await client.patch("/api/voice-settings", json={"speed": 0.9},
                                     headers=bearer(keys[Role.ADMIN]))
        me = {role: (await client.get("/api/me", headers=bearer(key))).json()
              for role, key in keys.items()}
        anonymous = await client.get("/api/me")

    assert [r.status_code for r in (history, settings, escalations, queue, admin_history,
                                    changed)] == [200] * 6
    workspace = await repo.get_workspace_by_name(db.pool, me[Role.ADMIN]["workspace_name"])
    assert workspace["id"] == workspace_id
    for role, key in keys.items():
        assert me[role] == {"workspace_id": workspace_id,
                            "workspace_name": me[Role.ADMIN]["workspace_name"],
                            "role": str(role), "key_prefix": key.split("_")[1]}
    assert anonymous.status_code == 401


async def test_keys_are_made_read_only_unless_a_role_is_named(settings, db):
    workspace_id, keys = await workspace_with_keys(db)
    _, theirs = await workspace_with_keys(db)
    admin = bearer(keys[Role.ADMIN])
    async with running_app(settings) as (_, client):
        plain = (await client.post("/api/keys", json={"name": "viewer"}, headers=admin)).json()
        operator = (await client.post("/api/keys", json={"name": "desk", "role": "operator"},
                                      headers=admin)).json()
        unknown = await client.post("/api/keys", json={"name": "x", "role": "owner"},
                                    headers=admin)
        listed = (await client.get("/api/keys", headers=admin)).json()
        their_list = (await client.get("/api/keys", headers=bearer(theirs[Role.ADMIN]))).json()
        viewer_tries = await client.patch("/api/voice-settings", json={"speed": 0.9},
                                          headers=bearer(plain["key"]))
        desk_watches = await client.get("/api/escalations", headers=bearer(operator["key"]))
        desk_tries = await client.post("/api/keys", json={"name": "mine", "role": "admin"},
                                       headers=bearer(operator["key"]))

    assert (plain["role"], operator["role"]) == ("read_only", "operator")
    assert unknown.status_code == 422
    roles = {key["name"]: key["role"] for key in listed}
    assert roles == {"viewer": "read_only", "desk": "operator", "admin key": "admin",
                     "operator key": "operator", "read_only key": "read_only"}
    assert {key["name"] for key in their_list} == {f"{role} key" for role in Role}
    assert viewer_tries.status_code == 403 and desk_watches.status_code == 200
    assert desk_tries.status_code == 403
    assert desk_tries.json()["detail"] == "this key's role (operator) cannot do this; it needs admin"
    assert len(await repo.list_api_keys(db.pool, workspace_id)) == 5  # nothing made by 403s
