"""Workspaces over the API and the command line: an admin creates a workspace and gets
its first admin key once; each workspace sees itself and those it created, never
another; names are validated and unique; every creation is audited (in both workspaces
over the API, as "cli" from the command line)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

import main
from api.deps import Role
from db import audit, workspaces
from db.pool import init_connection
from tests.api.app_client import bearer, running_app
from tests.api.test_roles import workspace_with_keys


def fresh_name(prefix: str = "clinic") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_an_admin_creates_a_workspace_and_gets_its_first_admin_key_once(settings, db):
    workspace_id, keys = await workspace_with_keys(db)
    their_id, theirs = await workspace_with_keys(db)
    admin = bearer(keys[Role.ADMIN])
    name = fresh_name()
    async with running_app(settings) as (_, client):
        created = await client.post("/api/workspaces", json={"name": f"  {name} "},
                                    headers=admin)
        new = created.json()
        new_key = bearer(new["admin_key"]["key"])
        new_me = (await client.get("/api/me", headers=new_key)).json()
        mine = (await client.get("/api/workspaces", headers=admin)).json()
        their_view = (await client.get("/api/workspaces",
                                       headers=bearer(theirs[Role.ADMIN]))).json()
        new_view = (await client.get("/api/workspaces", headers=new_key)).json()
        new_keys = (await client.get("/api/keys", headers=new_key)).json()
        new_audit = (await client.get("/api/audit", headers=new_key)).json()["entries"]
        new_history = await client.get("/api/calls", headers=new_key)
        taken = await client.post("/api/workspaces", json={"name": name}, headers=admin)
        by_operator = await client.post("/api/workspaces", json={"name": fresh_name()},
                                        headers=bearer(keys[Role.OPERATOR]))

    assert created.status_code == 201
    assert new["workspace"]["name"] == name  # trimmed
    assert new["admin_key"]["role"] == "admin" and new["admin_key"]["key"].startswith("vk_")
    assert new_me == {"workspace_id": new["workspace"]["id"], "workspace_name": name,
                      "role": "admin", "key_prefix": new["admin_key"]["prefix"]}
    assert [w["id"] for w in mine] == [workspace_id, new["workspace"]["id"]]
    assert set(mine[0]) == {"id", "name", "created_at"}
    assert [w["id"] for w in their_view] == [their_id]
    assert [w["id"] for w in new_view] == [new["workspace"]["id"]]  # not its creator
    assert [(k["name"], k["role"]) for k in new_keys] == [("first admin key", "admin")]
    assert [(e["action"], e["target"], e["after"]) for e in new_audit] == [
        ("workspace.create", new["workspace"]["id"], {
            "id": new["workspace"]["id"], "name": name, "created_by": workspace_id,
            "admin_key": {"name": "first admin key", "prefix": new["admin_key"]["prefix"],
                          "role": "admin"}})]
    assert new_history.json()["calls"] == []
    assert taken.status_code == 409
    assert by_operator.status_code == 403
    stored = await workspaces.get_workspace(db.pool, new["workspace"]["id"])
    assert stored["created_by"] == workspace_id


@pytest.mark.parametrize("name, reason", [
    ("", "empty"), ("   ", "empty"), ("x" * 101, "at most 100"),
    ("line\nbreak", "control"), ("bell\x07", "control"), ("zero\u200bwidth", "control"),
])
async def test_a_workspace_name_must_be_readable_and_nothing_is_created_otherwise(
        settings, db, name, reason):
    workspace_id, keys = await workspace_with_keys(db)
    async with running_app(settings) as (_, client):
        refused = await client.post("/api/workspaces", json={"name": name},
                                    headers=bearer(keys[Role.ADMIN]))
        listed = (await client.get("/api/workspaces", headers=bearer(keys[Role.ADMIN]))).json()

    assert refused.status_code == 422
    assert reason in str(refused.json()["detail"])
    assert [w["id"] for w in listed] == [workspace_id]
    assert await audit.list_changes(db.pool, workspace_id) == []


def test_a_name_of_exactly_100_characters_is_kept():
    assert workspaces.clean_workspace_name(" " + "é" * 100 + " ") == "é" * 100


@pytest.fixture
def cli(pg_dsn, tmp_path, monkeypatch):
    """main.main against the test database, its logging left to the test."""
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    monkeypatch.setattr(main, "configure_logging", lambda settings: None)
    return main.main


def read(dsn: str, query) -> object:
    """`query(connection)` on a connection of its own (the command line runs its own loop)."""
    async def run() -> object:
        connection = await asyncpg.connect(dsn)
        try:
            await init_connection(connection)
            return await query(connection)
        finally:
            await connection.close()

    return asyncio.run(run())


def test_the_cli_creates_and_lists_workspaces_and_makes_keys_with_a_role(cli, pg_dsn, capsys):
    name = fresh_name("cli")
    assert cli(["workspace", "create", name]) == 0
    out = capsys.readouterr()
    workspace_id = out.out.strip()
    assert cli(["workspace", "create", name]) == 2
    taken = capsys.readouterr().err
    assert cli(["workspace", "create", "bad\x07name"]) == 2
    invalid = capsys.readouterr().err
    assert cli(["api-key", "create", "--workspace", name, "--role", "operator",
                "--name", "desk"]) == 0
    operator_key = capsys.readouterr().out.strip()
    assert cli(["api-key", "create", "--workspace", name]) == 0
    admin_key = capsys.readouterr().out.strip()
    assert cli(["api-key", "list", "--workspace", name]) == 0
    listed = capsys.readouterr().out
    assert cli(["workspace", "list"]) == 0
    everyone = capsys.readouterr().out
    stored = read(pg_dsn, lambda conn: workspaces.get_workspace(conn, workspace_id))
    changes = read(pg_dsn, lambda conn: audit.list_changes(conn, workspace_id))

    assert (stored["name"], stored["created_by"]) == (name, None)
    assert f"api-key create --workspace {name}" in out.err
    assert "exists" in taken and "control characters" in invalid
    assert f"vk_{operator_key.split('_')[1]}_…  desk  active  operator" in listed
    assert f"vk_{admin_key.split('_')[1]}_…  cli  active  admin" in listed
    assert f"{workspace_id}  {name}  clinics 0  keys 2  " in everyone
    assert [(c["actor"], c["action"]) for c in reversed(changes)] == [
        ("cli", "workspace.create"), ("cli", "api_key.create"), ("cli", "api_key.create")]
    assert changes[-2]["after"] == {"name": "desk", "prefix": operator_key.split("_")[1],
                                    "role": "operator"}
