"""Graph versions are stored per workspace or service, and a call runs (and names) the latest."""

import asyncio
import uuid

import pytest

from config import Settings
from db import repositories as repo
from db.graph_store import GraphVersionExists, latest_graph, save_graph
from flows.graph import bundled_graph
from runner.runtime import AppRuntime
from tests.worker_pools import pools_left_to_the_next_app


def definition(version: int, **changes) -> dict:
    data = bundled_graph("clinic_booking").model_dump(mode="json")
    return {**data, "version": version, **changes}


async def test_the_service_version_wins_over_the_workspace_and_versions_never_change(
    db, workspace_id
):
    clinic = await repo.create_service(db.pool, workspace_id, f"c-{uuid.uuid4().hex[:6]}")
    other = await repo.create_service(db.pool, workspace_id, f"o-{uuid.uuid4().hex[:6]}")
    await save_graph(db.pool, workspace_id, definition(2))
    await save_graph(db.pool, workspace_id, definition(3, description="clinic only"), clinic["id"])
    with pytest.raises(GraphVersionExists):
        await save_graph(db.pool, workspace_id, definition(2, description="edited"))
    ours = await latest_graph(db.pool, workspace_id, clinic["id"], "clinic_booking")
    theirs = await latest_graph(db.pool, workspace_id, other["id"], "clinic_booking")
    assert (ours["version"], ours["description"]) == (3, "clinic only")
    assert theirs["version"] == 2
    assert await latest_graph(db.pool, workspace_id, other["id"], "companion_checkin") is None


async def test_a_call_runs_the_stored_version_and_its_record_says_which(tmp_path, pg_dsn, db):
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    number = f"+1555010{uuid.uuid4().int % 10000:04d}"
    clinic = await repo.create_service(
        db.pool, workspace["id"], "Graph Clinic", phone_number=number
    )
    await save_graph(db.pool, workspace["id"], definition(7))
    broken = await repo.create_service(db.pool, workspace["id"], "Broken Graph Clinic",
                                       phone_number=f"{number[:-1]}{(int(number[-1]) + 1) % 10}")
    bad = definition(9)
    bad["tools"]["CreateAppointment"]["guards"] = ["trust_me"]
    await save_graph(db.pool, workspace["id"], bad, broken["id"])

    runtime = await AppRuntime.start(
        Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)
    )
    try:
        profile = await runtime.resolve_profile("call", number)
        fallback = await runtime.resolve_profile("call", broken["phone_numbers"][0])
    finally:
        with pools_left_to_the_next_app():
            await runtime.close()
    assert profile.graph.version == 7
    assert runtime.snapshot(profile)["context_graph"]["version"] == 7
    assert fallback.graph.version == 1  # the bundled graph, and the reason is on record
    assert "unknown guard 'trust_me'" in fallback.graph_problems[0]
    assert clinic["id"] == profile.service_id


async def test_the_cli_stores_a_checked_graph_once(tmp_path, pg_dsn, db, monkeypatch, capsys):
    import yaml

    import main

    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(definition(4)))
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    # The CLI's logging would outlive the test on capsys's stream (closed after it).
    monkeypatch.setattr(main, "configure_logging", lambda settings: None)
    args = ["save-graph", str(path), "--workspace", workspace["name"]]
    assert await asyncio.to_thread(main.main, args) == 0
    assert await asyncio.to_thread(main.main, args) == 2  # the same version again
    assert "already stored" in capsys.readouterr().err
    path.write_text(yaml.safe_dump(definition(5, initial_state="nowhere")))
    assert await asyncio.to_thread(main.main, args) == 2
    stored = await latest_graph(db.pool, workspace["id"], None, "clinic_booking")
    assert stored["version"] == 4
