"""The `call_analysis` job: a finished call's summary, quality score and memories, durable.

The summary and the score are written first; then what the identified patient said that
is worth remembering is extracted and kept with their memories (`db/memories.remember`:
de-duplicated, so a retried job changes nothing). An unidentified caller leaves no
memories: nobody's record could hold them.

Queued once the call's record is closed (one per call, `call_analysis:<call id>`): by the
call's own end, or by the sweep that closes the calls of a process that died. It runs
when the workspace's voice settings keep `post_call_analysis_enabled` on (read when it
runs, so a call closed by the sweep is held to it too). It never delays the
end of a call and survives a restart: a worker that dies mid-run leaves it to another. A
run that fails is retried with backoff; the last failure is an event on the call
(`call_analysis_failed`, its error class only) and the call itself is untouched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
from loguru import logger

from analysis.analyst import Analysis, Analyst
from analysis.memories import MemoryExtractor
from call.voice_settings import parse_voice_settings
from config.memory import MemorySettings
from db import call_analyses, jobs, memories, stt_suggestions
from db import repositories as repo
from db.call_analyses import CallRecord
from db.writer import CallRecordWriter
from runner.job_retries import Retries, last_try
from runner.post_call import call_log_after

ENTRYPOINT = "call_analysis"
RETRIES = Retries(max_attempts=3, initial_delay=timedelta(seconds=30),
                  max_delay=timedelta(minutes=5))


def analysis_key(call_id: str) -> str:
    return f"{ENTRYPOINT}:{call_id}"


async def queue_call_analysis(db: asyncpg.Pool | asyncpg.Connection, call_id: str
                              ) -> int | None:
    """Queue the call's analysis (None: it is already queued or running)."""
    return await jobs.enqueue(db, ENTRYPOINT, {"call_id": call_id},
                              dedupe_key=analysis_key(call_id))


@dataclass(frozen=True)
class CallAnalysisParts:
    """What the analysis needs from the process."""

    pool: asyncpg.Pool
    writer: CallRecordWriter | None
    analyst: Analyst
    memory: MemoryExtractor | None = None  # None: memories are not kept
    embedder: memories.Embedder | None = None
    memory_policy: MemorySettings = field(default_factory=lambda: memories.DEFAULT_POLICY)


@dataclass(frozen=True)
class AnalysisDone:
    analysis: Analysis
    memories_added: int = 0
    memories_reinforced: int = 0
    memory_analyst: str | None = None
    memory_fallback: str | None = None
    memory_ms: int = 0


async def analysis_enabled(pool: asyncpg.Pool, workspace_id: str) -> bool:
    """The workspace's voice settings keep after-call analysis on (unreadable: the default)."""
    voice, _problems = parse_voice_settings(await repo.get_voice_settings_raw(pool, workspace_id))
    return voice.post_call_analysis_enabled


async def analyse_call(parts: CallAnalysisParts, record: CallRecord) -> Analysis:
    """Analyse one call's record and store the result (replacing an earlier one)."""
    started = time.perf_counter()
    analysis = await parts.analyst.analyse(record)
    duration_ms = round(1000 * (time.perf_counter() - started))
    await call_analyses.store_analysis(
        parts.pool, record, analyst=analysis.analyst, fallback=analysis.fallback,
        summary=analysis.summary.as_json(), quality=analysis.quality.as_json(),
        quality_score=analysis.quality.overall, duration_ms=duration_ms)
    return analysis


async def propose_keyterms(parts: CallAnalysisParts, record: CallRecord,
                           analysis: Analysis) -> None:
    """Words the model says the recognizer misheard, proposed as the service's keyterms
    (an operator decides). A failure here loses only the proposal, never the analysis."""
    if not analysis.misheard or record.service_id is None:
        return
    try:
        await stt_suggestions.record_misheard(parts.pool, record.workspace_id,
                                              record.service_id, record.call_id,
                                              list(analysis.misheard))
    except Exception as error:  # noqa: BLE001 - the summary and score are already stored
        logger.warning(f"call {record.call_id}: misheard words not proposed "
                       f"({type(error).__name__})")


async def keep_memories(parts: CallAnalysisParts, record: CallRecord,
                        analysis: Analysis) -> AnalysisDone:
    """What the identified patient said worth remembering, kept with their memories."""
    if parts.memory is None or record.patient_id is None:
        return AnalysisDone(analysis)
    started = time.perf_counter()
    found = await parts.memory.extract(record)
    kept = await memories.remember(parts.pool, record.patient_id, list(found), parts.embedder,
                                   record.call_id, policy=parts.memory_policy)
    return AnalysisDone(analysis, len(kept.added), len(kept.reinforced), found.analyst,
                        found.fallback, round(1000 * (time.perf_counter() - started)))


async def run_call_analysis(parts: CallAnalysisParts, payload: dict[str, Any], *,
                            retries: Retries = RETRIES) -> AnalysisDone | None:
    call_id = str(payload.get("call_id") or "")
    if not call_id:
        logger.warning("call_analysis job without a call id: nothing to do")
        return None
    try:
        record = await call_analyses.load_call_record(parts.pool, call_id)
        if record is None:
            logger.warning(f"call {call_id}: not analysed (no such call in a workspace)")
            return None
        if not await analysis_enabled(parts.pool, record.workspace_id):
            logger.info(f"call {call_id}: not analysed (its workspace turned analysis off)")
            return None
        analysis = await analyse_call(parts, record)
        await propose_keyterms(parts, record, analysis)
        done = await keep_memories(parts, record, analysis)
    except Exception as error:
        if await last_try(parts.pool, analysis_key(call_id), retries):
            log = await call_log_after(parts.pool, parts.writer, call_id)
            log.event("call_analysis_failed", error=type(error).__name__)
        logger.warning(f"call {call_id}: analysis failed ({type(error).__name__})")
        raise
    analysis = done.analysis
    log = await call_log_after(parts.pool, parts.writer, call_id)
    log.event("call_analysed", analyst=analysis.analyst, fallback=analysis.fallback,
              quality=analysis.quality.overall, memories_added=done.memories_added,
              memories_reinforced=done.memories_reinforced,
              memory_fallback=done.memory_fallback)
    logger.info(f"call {call_id}: analysed by {analysis.analyst}, quality "
                f"{analysis.quality.overall}, {done.memories_added} memories added, "
                f"{done.memories_reinforced} reinforced")
    return done
