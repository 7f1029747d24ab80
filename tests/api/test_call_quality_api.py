"""Finding the bad calls among hundreds: each analysed call's quality score in the
history, worst first page by page, a filter under a score, its summary and five scores
in the detail, and the weekly trend."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from analysis.analyst import RulesAnalyst
from db import repositories as repo
from runner.call_analysis import CallAnalysisParts, run_call_analysis
from tests.api.app_client import bearer, running_app
from tests.api.test_calls_api import insert_call
from tests.world.conftest import transcript

DIMENSIONS = ["task_completion", "information_accuracy", "conversation_flow",
              "error_recovery", "caller_experience"]


@pytest.fixture
async def key(db, workspace_id) -> str:
    return await repo.create_api_key(db.pool, workspace_id, "test")


async def scored(db, workspace_id: str, started_at: datetime, score: float) -> str:
    """An analysed call with `score` overall (every dimension the same)."""
    call_id = await insert_call(db, workspace_id, started_at)
    quality = {name: {"score": round(score), "reason": "set", "turns": []} for name in DIMENSIONS}
    await db.pool.execute(
        "INSERT INTO call_analyses (call_id, workspace_id, analyst, summary, quality, "
        "quality_score, duration_ms) VALUES ($1, $2, 'rules', '{}', $3, $4, 1)",
        uuid.UUID(call_id), uuid.UUID(workspace_id), quality, score)
    return call_id


async def test_the_worst_calls_come_first_page_by_page_and_unanalysed_calls_are_left_out(
        db, settings, workspace_id, key):
    now = datetime.now(UTC)
    calls = {score: await scored(db, workspace_id, now - timedelta(minutes=i), score)
             for i, score in enumerate([4.6, 1.8, 3.2, 2.4, 5.0], start=1)}
    tie = await scored(db, workspace_id, now - timedelta(minutes=9), 2.4)
    unanalysed = await insert_call(db, workspace_id, now)
    async with running_app(settings) as (_, client):
        seen, cursor = [], None
        while True:
            page = (await client.get("/api/calls", headers=bearer(key), params={
                "sort": "worst", "limit": 2, **({"cursor": cursor} if cursor else {})})).json()
            seen += [(c["id"], c["quality_score"]) for c in page["calls"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        newest = (await client.get("/api/calls", headers=bearer(key))).json()["calls"]

    assert [call for call, _ in seen] == [calls[1.8], calls[2.4], tie, calls[3.2], calls[4.6],
                                          calls[5.0]]
    assert [round(score, 1) for _, score in seen] == [1.8, 2.4, 2.4, 3.2, 4.6, 5.0]
    assert newest[0]["id"] == unanalysed and newest[0]["quality_score"] is None


async def test_a_cursor_from_one_order_is_refused_in_the_other(db, settings, workspace_id, key):
    now = datetime.now(UTC)
    for i in range(3):
        await scored(db, workspace_id, now - timedelta(minutes=i), 3.0 + i / 2)
    async with running_app(settings) as (_, client):
        newest = (await client.get("/api/calls", headers=bearer(key),
                                   params={"limit": 1})).json()["next_cursor"]
        worst = (await client.get("/api/calls", headers=bearer(key),
                                  params={"limit": 1, "sort": "worst"})).json()["next_cursor"]
        crossed = [await client.get("/api/calls", headers=bearer(key),
                                    params={"cursor": newest, "sort": "worst"}),
                   await client.get("/api/calls", headers=bearer(key),
                                    params={"cursor": worst})]

    assert [r.status_code for r in crossed] == [400, 400]
    assert all("other order" in r.json()["detail"] for r in crossed)


async def test_calls_under_a_score_are_found_and_bad_scores_are_refused(
        db, settings, workspace_id, key):
    now = datetime.now(UTC)
    low = await scored(db, workspace_id, now, 2.2)
    await scored(db, workspace_id, now - timedelta(minutes=1), 4.4)
    async with running_app(settings) as (_, client):
        under = await client.get("/api/calls", headers=bearer(key), params={"quality_below": 3})
        bad = [await client.get("/api/calls", headers=bearer(key), params={"quality_below": v})
               for v in ("0", "6", "three")]

    assert [c["id"] for c in under.json()["calls"]] == [low]
    assert [r.status_code for r in bad] == [422, 422, 422]


async def test_a_calls_detail_shows_its_summary_and_five_scores_with_their_turns(
        db, settings, workspace_id, key):
    call_id = await insert_call(db, workspace_id, datetime.now(UTC))
    await transcript(db, call_id, ("agent", "How can I help?"),
                     ("caller", "I need to cancel my appointment for tomorrow"),
                     ("agent", "I couldn't find an appointment for tomorrow."))
    await run_call_analysis(CallAnalysisParts(db.pool, None, RulesAnalyst()),
                            {"call_id": call_id})
    async with running_app(settings) as (_, client):
        detail = (await client.get(f"/api/calls/{call_id}", headers=bearer(key))).json()
        listed = (await client.get("/api/calls", headers=bearer(key))).json()["calls"]

    analysis = detail["analysis"]
    assert analysis["analyst"] == "rules"
    assert analysis["summary"]["wanted"][0] == {
        "text": "Cancel an appointment", "turns": [2], "task": "cancel",
        "recap": "called to cancel an appointment", "kind": None}
    assert analysis["summary"]["left_for_person"][0]["text"] == "Not done: cancel an appointment"
    assert list(analysis["quality"]) == DIMENSIONS
    assert analysis["quality"]["task_completion"] == {
        "score": 1, "reason": "Not done: cancel an appointment; nothing else was either.",
        "turns": [2]}
    assert listed[0]["quality_score"] == analysis["quality_score"]


async def test_the_trend_averages_each_week_and_counts_the_low_calls(
        db, settings, workspace_id, key):
    monday = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    monday -= timedelta(days=monday.weekday())
    for score in (2.0, 4.0):
        await scored(db, workspace_id, monday - timedelta(weeks=1), score)
    await scored(db, workspace_id, monday, 5.0)
    await scored(db, workspace_id, monday - timedelta(weeks=30), 1.0)  # too long ago
    async with running_app(settings) as (_, client):
        trend = (await client.get("/api/calls/quality-trend", headers=bearer(key),
                                  params={"weeks": 4})).json()

    assert [(w["calls"], w["average"], w["low"]) for w in trend] == [(2, 3.0, 1), (1, 5.0, 0)]
    assert trend[0]["dimensions"]["task_completion"] == 3.0
    assert datetime.fromisoformat(trend[1]["week_start"]).weekday() == 0
