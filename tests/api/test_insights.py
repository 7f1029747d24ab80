"""The state guide: the graph merged with aggregates, and the endpoint over
crafted call records, scoped to the key's workspace and to the last N calls."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from config import Settings
from db import repositories as repo
from db.insights import (
    CallAggregates,
    StateCount,
    ToolCount,
    TriggerCount,
    ValueCount,
    call_aggregates,
)
from flows.graph import parse_graph
from flows.state_guide import error_pct, state_guide
from tests.api.app_client import app_in_testclient

TINY = {
    "id": "tiny", "version": 3, "description": "A small graph.", "initial_state": "start",
    "phases": {"identify": "Figure out the request.", "wrap": "Say goodbye."},
    "actions": {"hello": {"description": "Greet."}, "ask": {"description": "Ask."},
                "bye": {"description": "Goodbye."}},
    "tools": {"Lookup": {"description": "Read.", "kind": "read"},
              "Book": {"description": "Write.", "kind": "write"}},
    "super_states": {"booking": {"description": "Booking.", "initial": "choose",
                                 "tools": ["Lookup", "Book"]}},
    "states": {
        "start": {"type": "action", "description": "Start.", "actions": ["hello"], "tools": [],
                  "exits": [{"name": "spoke", "to": "booking", "description": "d", "when": {}}]},
        "choose": {"type": "action", "description": "Choose.", "parent": "booking",
                   "phases": ["identify"], "actions": ["ask"], "tools": ["Lookup"],
                   "exits": [{"name": "chosen", "to": "confirm", "description": "d"}]},
        "confirm": {"type": "action", "description": "Confirm.", "parent": "booking",
                    "actions": ["ask"],
                    "exits": [{"name": "done", "to": "closing", "description": "d"}]},
        "closing": {"type": "action", "description": "End.", "phases": ["wrap"],
                    "actions": ["bye"]},
    },
}
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def test_error_pct_has_one_decimal_and_rounds_halves_up():
    assert error_pct(0, 0) is None
    assert error_pct(0, 7) == 0.0
    assert error_pct(1, 3) == 33.3
    assert error_pct(2, 3) == 66.7
    assert error_pct(1, 16) == 6.3  # 6.25: a float round() would give 6.2
    assert error_pct(63, 240) == 26.3  # 26.25 rounds half up
    assert error_pct(7, 7) == 100.0


def test_guide_marks_never_observed_undocumented_and_splits_tool_errors():
    graph = parse_graph(TINY)
    seen = CallAggregates(
        calls=4, first_started_at=T0, last_started_at=T0 + timedelta(hours=1),
        states=[StateCount("start", 4, 4, T0), StateCount("choose", 5, 3, T0),
                StateCount("legacy_state", 2, 1, T0)],
        triggers=[TriggerCount("start", "spoke", "choose", 4, T0),
                  TriggerCount("choose", "legacy", "legacy_state", 2, T0),
                  TriggerCount("choose", "chosen", "confirm", 1, T0)],
        tools=[ToolCount("Lookup", 16, {"pms": 1}, T0),
               ToolCount("Book", 8, {"guard": 2, "pms": 1, "timeout": 1, "other": 1}, T0),
               ToolCount("Fax", 1, {}, T0)],
        completion_reasons=[ValueCount("caller_hangup", 1), ValueCount("agent_ended", 3)],
        final_states=[ValueCount("closing", 3), ValueCount(None, 1)],
    )

    guide = state_guide(graph, seen)

    states = {s.name: s for s in guide.states}
    assert (guide.canonical_states, guide.observed_states) == (4, 2)
    assert (states["choose"].times_observed, states["choose"].calls_reached) == (5, 3)
    assert states["confirm"].never_observed and states["confirm"].times_observed == 0
    assert states["closing"].never_observed and states["closing"].terminal
    assert states["start"].initial and not states["start"].never_observed
    assert states["confirm"].super_states == ["booking"]
    assert states["confirm"].tools == ["Book", "Lookup"]  # inherited from the super-state
    assert states["choose"].phases == ["identify"]
    [booking] = guide.super_states
    assert (booking.leaves, booking.leaves_observed, booking.observed_total) == (
        ["choose", "confirm"], 1, 5)
    assert [(u.name, u.times_observed) for u in guide.undocumented] == [("legacy_state", 2)]

    triggers = [(t.state, t.exit, t.to, t.count, t.canonical) for t in guide.triggers]
    assert triggers == [("start", "spoke", "choose", 4, True),  # into the super-state's entry
                        ("choose", "legacy", "legacy_state", 2, False),
                        ("choose", "chosen", "confirm", 1, True)]

    tools = {t.name: t for t in guide.tools}
    book = tools["Book"]
    assert (book.calls, book.ok, book.guard, book.pms, book.other) == (8, 3, 2, 1, 2)
    assert book.error_pct == 62.5
    assert tools["Lookup"].error_pct == 6.3
    assert tools["Lookup"].allowed_in == ["choose", "confirm"]
    assert tools["Fax"].canonical is False and tools["Fax"].kind is None
    assert [t.name for t in guide.tools] == ["Lookup", "Book", "Fax"]  # most called first
    assert [v.value for v in guide.completion_reasons] == ["agent_ended", "caller_hangup"]
    assert (guide.graph_id, guide.graph_version, guide.calls_analyzed) == ("tiny", 3, 4)


def test_a_graph_never_called_shows_every_state_never_observed_and_no_error_pct():
    guide = state_guide(parse_graph(TINY), CallAggregates(calls=0))
    assert all(s.never_observed for s in guide.states)
    assert guide.undocumented == [] and guide.triggers == []
    assert {t.name: t.error_pct for t in guide.tools} == {"Book": None, "Lookup": None}


async def crafted_call(db, workspace_id, service_id, started_at, hops, tools, reason, final):
    """A finished call with transitions [(previous, reason, next)] and tools [(name, error)]."""
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="eval", from_number=None, to_number=None, status="completed")
    call = uuid.UUID(call_id)
    await db.pool.execute(
        "UPDATE calls SET started_at = $2, completion_reason = $3, final_state = $4 "
        "WHERE id = $1", call, started_at, reason, final)
    for seq, (previous, why, target) in enumerate(hops, 1):
        await db.pool.execute(
            "INSERT INTO state_transitions (call_id, seq, previous_state, next_state, reason) "
            "VALUES ($1, $2, $3, $4, $5)", call, seq, previous, target, why)
    for n, (name, error_class) in enumerate(tools, 1):
        await db.pool.execute(
            "INSERT INTO tool_calls (call_id, tool_call_id, name, succeeded, error_class) "
            "VALUES ($1, $2, $3, $4, $5)", call, f"t{n}", name, error_class is None, error_class)
    return call_id


OPENING = [("init", "prefetched", "greeting"), ("greeting", "caller_spoke", "booking_discovery")]


@pytest.fixture
async def crafted(db, workspace_id):
    """Three calls of one service (the oldest reached `hours`), one of another workspace."""
    service = await repo.create_service(db.pool, workspace_id, "clinic")
    sid = str(service["id"])
    await crafted_call(db, workspace_id, sid, T0, [*OPENING, ("booking_discovery", "qa", "hours")],
                       [("GetServicesAndPricing", None)], "caller_hangup", "hours")
    await crafted_call(
        db, workspace_id, sid, T0 + timedelta(minutes=1),
        [*OPENING, ("booking_discovery", "improvised", "booking_in_progress")],
        [("CheckAvailability", None), ("CheckAvailability", "guard"),
         ("CreateAppointment", "pms")], "agent_ended", "closing")
    await crafted_call(
        db, workspace_id, sid, T0 + timedelta(minutes=2), OPENING,
        [("CheckAvailability", None), ("CheckAvailability", "other")], "agent_ended", "closing")
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other_service = await repo.create_service(db.pool, other["id"], "clinic")
    await crafted_call(db, other["id"], str(other_service["id"]), T0 + timedelta(minutes=3),
                       [*OPENING, ("booking_discovery", "query", "answering_query")],
                       [("CancelAppt", "guard")], "agent_ended", "answering_query")
    return sid, other["id"]


async def test_aggregates_read_only_the_last_n_calls_of_the_workspace(db, workspace_id, crafted):
    sid, _other = crafted
    seen = await call_aggregates(db.pool, workspace_id, sid, 2)

    assert seen.calls == 2
    assert seen.first_started_at == T0 + timedelta(minutes=1)
    states = {s.state: (s.times, s.calls) for s in seen.states}
    assert states == {"init": (2, 2), "greeting": (2, 2), "booking_discovery": (2, 2),
                      "booking_in_progress": (1, 1)}
    triggers = {(t.state, t.reason, t.to): t.count for t in seen.triggers}
    assert triggers == {("init", "prefetched", "greeting"): 2,
                        ("greeting", "caller_spoke", "booking_discovery"): 2,
                        ("booking_discovery", "improvised", "booking_in_progress"): 1}
    tools = {t.name: (t.calls, t.error_classes) for t in seen.tools}
    assert tools == {"CheckAvailability": (4, {"guard": 1, "other": 1}),
                     "CreateAppointment": (1, {"pms": 1})}
    assert {v.value: v.count for v in seen.completion_reasons} == {"agent_ended": 2}


@pytest.mark.usefixtures("worker_pools_started")
async def test_state_guide_endpoint_merges_the_services_graph_for_the_keys_workspace(
        tmp_path, pg_dsn, db, workspace_id, crafted):
    sid, other = crafted
    key = await repo.create_api_key(db.pool, workspace_id, "test")
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        auth = {"Authorization": f"Bearer {key}"}
        guide = client.get("/api/insights/state-guide", headers=auth)  # the default service
        last_two = client.get(f"/api/insights/state-guide?service_id={sid}&last=2", headers=auth)
        anonymous = client.get("/api/insights/state-guide")
        too_many = client.get("/api/insights/state-guide?last=5001", headers=auth)
        not_a_service = client.get("/api/insights/state-guide?service_id=nope", headers=auth)
        other_service = await repo.default_service(db.pool, other)
        theirs = client.get(
            f"/api/insights/state-guide?service_id={other_service['id']}", headers=auth)

    assert anonymous.status_code == 401
    assert too_many.status_code == 422
    assert not_a_service.status_code == theirs.status_code == 404
    assert guide.status_code == 200, guide.text
    body = guide.json()
    assert (body["graph_id"], body["service_id"], body["calls_analyzed"]) == (
        "clinic_booking", sid, 3)
    states = {s["name"]: s for s in body["states"]}
    assert states["hours"]["times_observed"] == 1
    assert states["hours"]["super_states"] == ["qa"]
    assert states["init"]["initial"] and states["init"]["calls_reached"] == 3
    assert states["answering_query"]["never_observed"]  # only the other workspace reached it
    assert [u["name"] for u in body["undocumented"]] == ["booking_in_progress"]
    tools = {t["name"]: t for t in body["tools"]}
    check = tools["CheckAvailability"]
    assert (check["calls"], check["ok"], check["guard"], check["other"], check["error_pct"]) == (
        4, 2, 1, 1, 50.0)
    assert tools["CancelAppt"]["calls"] == 0 and tools["CancelAppt"]["error_pct"] is None
    triggers = {(t["state"], t["exit"]): t for t in body["triggers"]}
    assert triggers[("init", "prefetched")]["canonical"]
    assert not triggers[("booking_discovery", "improvised")]["canonical"]
    assert body["phases"]["identify_intent"].startswith("Figure out")

    recent = last_two.json()
    assert recent["calls_analyzed"] == 2
    assert {s["name"]: s for s in recent["states"]}["hours"]["never_observed"]
