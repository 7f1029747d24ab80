"""The call_analysis job: a finished call gets its summary and quality score from its
durable job (one per call); a run that fails is retried and its last failure is an event
on the call, which keeps its record; a job that cannot be queued runs here instead."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from analysis.analyst import RulesAnalyst
from analysis.memories import RulesMemoryExtractor
from call.call_session import CallLog
from db import call_analyses, jobs
from db import repositories as repo
from db.pool import Database
from runner.call_analysis import (
    ENTRYPOINT,
    CallAnalysisParts,
    analysis_key,
    queue_call_analysis,
    run_call_analysis,
)
from runner.job_retries import Retries
from runner.job_worker import JobWorker
from runner.runtime import AppRuntime
from services.embeddings import LocalEmbedder
from tests.db.test_memories import patient
from tests.db.test_post_call_job import QueueDown
from tests.fakes import CollectingWriter
from tests.jobs import held_failed, test_worker, work_until
from tests.world.conftest import transcript

pytestmark = pytest.mark.timeout(40)
FAST = Retries(max_attempts=1, initial_delay=timedelta(seconds=0.1),
               max_delay=timedelta(seconds=0.2))


def worker(db: Database, parts: CallAnalysisParts) -> JobWorker:
    async def run(payload: dict) -> None:
        await run_call_analysis(parts, payload, retries=FAST)

    return test_worker(db, {ENTRYPOINT: FAST.kind(ENTRYPOINT, run)})


class BrokenAnalyst:
    name = "broken"

    async def analyse(self, record):
        raise RuntimeError("analysis crashed")


async def test_a_finished_call_is_summarised_and_scored_by_its_job(db, call_id, stored_writer):
    await transcript(db, call_id, ("agent", "Thanks for calling, how can I help?"),
                     ("caller", "what are your opening hours on friday"),
                     ("agent", "We're open from 8 AM to 6 PM on Fridays."))
    assert await queue_call_analysis(db.pool, call_id) is not None
    assert await queue_call_analysis(db.pool, call_id) is None  # one job per call
    jobs_here = worker(db, CallAnalysisParts(db.pool, stored_writer, RulesAnalyst()))
    await work_until(jobs_here, lambda: call_analyses.get_analysis(db.pool, call_id))

    analysis = await call_analyses.get_analysis(db.pool, call_id)
    assert analysis["analyst"] == "rules" and analysis["fallback"] is None
    assert analysis["summary"]["wanted"][0]["text"] == "Ask about opening hours"
    assert analysis["summary"]["wanted"][0]["turns"] == [2]
    assert set(analysis["quality"]) == {"task_completion", "information_accuracy",
                                        "conversation_flow", "error_recovery",
                                        "caller_experience"}
    assert 1 <= analysis["quality_score"] <= 5
    assert await stored_writer.flush(5)
    detail = await repo.get_call_detail(db.pool, call_id, await _workspace(db, call_id))
    assert [e["type"] for e in detail["events"]] == ["call_analysed"]
    assert await jobs.job_for(db.pool, analysis_key(call_id)) is None  # done


async def test_running_the_analysis_again_replaces_it(db, call_id):
    await transcript(db, call_id, ("caller", "I need to cancel my appointment"))
    parts = CallAnalysisParts(db.pool, None, RulesAnalyst())
    await run_call_analysis(parts, {"call_id": call_id})
    await transcript_more(db, call_id)
    await run_call_analysis(parts, {"call_id": call_id})

    rows = await db.pool.fetchval("SELECT count(*) FROM call_analyses WHERE call_id = $1::uuid",
                                  call_id)
    analysis = await call_analyses.get_analysis(db.pool, call_id)
    assert rows == 1
    assert [w["text"] for w in analysis["summary"]["wanted"]] == [
        "Cancel an appointment", "Ask about opening hours"]


async def transcript_more(db, call_id: str) -> None:
    await db.pool.execute(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) "
        "VALUES ($1::uuid, 9, 'caller', 'caller', 'and when do you open tomorrow')", call_id)


async def test_an_analysis_that_keeps_failing_says_so_on_the_call_and_is_held(
        db, call_id, stored_writer):
    await transcript(db, call_id, ("caller", "book me in for a flu shot"))
    own = CallLog(call_id, stored_writer)
    own.event("call_ended", reason="caller_hangup")
    assert await stored_writer.flush(5)
    await queue_call_analysis(db.pool, call_id)
    jobs_here = worker(db, CallAnalysisParts(db.pool, stored_writer, BrokenAnalyst()))
    await work_until(jobs_here, lambda: held_failed(db, analysis_key(call_id)))

    assert await stored_writer.flush(5)
    detail = await repo.get_call_detail(db.pool, call_id, await _workspace(db, call_id))
    assert [(e["type"], e["data"]) for e in detail["events"]] == [
        ("call_ended", {"reason": "caller_hangup"}),
        ("call_analysis_failed", {"error": "RuntimeError"})]
    assert detail["status"] == "in_progress"  # the call's own record is untouched
    assert await call_analyses.get_analysis(db.pool, call_id) is None


async def _workspace(db, call_id: str) -> str:
    return str(await db.pool.fetchval("SELECT workspace_id FROM calls WHERE id = $1::uuid",
                                      call_id))


async def test_an_analysis_that_cannot_be_queued_runs_here_and_the_call_says_so(db, call_id):
    await transcript(db, call_id, ("caller", "can someone call me back please"))
    record = CollectingWriter()
    runtime = SimpleNamespace(db=QueueDown(db.pool), analyst=RulesAnalyst(), writer=None)
    runtime.analysis_parts = lambda: CallAnalysisParts(db.pool, None, runtime.analyst)

    await AppRuntime._queue_analysis(runtime, call_id, CallLog(call_id, record))

    assert [e.type for e in record.events()] == ["call_analysis_not_queued"]
    assert await call_analyses.get_analysis(db.pool, call_id) is not None
    assert await jobs.job_for(db.pool, analysis_key(call_id)) is None


async def test_what_an_identified_patient_said_is_remembered_once_however_often_it_runs(
        db, call_id, workspace_id):
    mira = await patient(db, workspace_id, "Mira")
    await db.pool.execute("UPDATE calls SET patient_id = $2::uuid WHERE id = $1::uuid",
                          call_id, mira)
    await transcript(db, call_id, ("agent", "How can I help?"),
                     ("caller", "I'd like a check up, and mornings suit me best because I work"),
                     ("agent", "I have Monday at 9."))
    parts = CallAnalysisParts(db.pool, None, RulesAnalyst(), memory=RulesMemoryExtractor(),
                              embedder=LocalEmbedder())

    first = await run_call_analysis(parts, {"call_id": call_id})
    again = await run_call_analysis(parts, {"call_id": call_id})  # a retried job

    assert (first.memories_added, again.memories_added, again.memories_reinforced) == (1, 0, 0)
    texts = await db.pool.fetch("SELECT text, kind FROM memories WHERE patient_id = $1::uuid",
                                mira)
    assert [(r["kind"], "morning" in r["text"].lower()) for r in texts] == [("preference", True)]


async def test_an_unidentified_caller_leaves_no_memories(db, call_id):
    await transcript(db, call_id, ("caller", "I prefer afternoons, I'm hard of hearing"))
    parts = CallAnalysisParts(db.pool, None, RulesAnalyst(), memory=RulesMemoryExtractor())

    done = await run_call_analysis(parts, {"call_id": call_id})

    assert done.memories_added == 0
    assert await db.pool.fetchval("SELECT count(*) FROM memories WHERE source_call = $1::uuid",
                                  call_id) == 0


async def test_a_workspace_that_turned_analysis_off_gets_none_even_from_a_queued_job(
        db, call_id, workspace_id):
    await repo.set_voice_settings(db.pool, workspace_id, {"post_call_analysis_enabled": False})
    await transcript(db, call_id, ("caller", "I'd like to book a flu shot"))

    done = await run_call_analysis(CallAnalysisParts(db.pool, None, RulesAnalyst()),
                                   {"call_id": call_id})

    assert done is None and await call_analyses.get_analysis(db.pool, call_id) is None
