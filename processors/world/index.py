"""Semantic search over the world model: patients (misspelled, partial) and events.

Patients are found two ways at once and then ranked on what the caller actually said:
- the name's spelling (`SpellingEmbedder`, HNSW) finds "Elenor Kowalsky";
- exact fields (date of birth, phone, MRN) find the rest;
and each candidate is scored with `rapidfuzz` on the name plus exact field matches.
Events are found by meaning (the sentence embedder: OpenAI when configured, else
WordLlama), optionally within one patient's events.

Indexing is off the voice path: writes hand new rows to `index_soon` (a bounded
background task); `backfill` embeds whatever is missing (start-up, after a model
change, after a failed background index), so nothing is lost for long.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date

import asyncpg
from loguru import logger
from rapidfuzz import fuzz

from db import world
from db import world_search as store
from db.world import ClinicalEvent, PatientRecord
from language.fields import normalize_phone
from lib.event_loop import BackgroundTasks
from processors.world.documents import patient_document
from services.embeddings import Embedder, SpellingEmbedder

NAME_CANDIDATES = 40
INDEX_TIMEOUT_S = 10.0
BACKFILL_BATCH = 500
MIN_NAME_SCORE = 0.72  # below this a name is not the one the caller said


@dataclass(frozen=True)
class PatientQuery:
    name: str | None = None
    date_of_birth: date | None = None
    phone: str | None = None
    mrn: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.name or self.date_of_birth or self.phone or self.mrn)


@dataclass(frozen=True)
class PatientMatch:
    patient: PatientRecord
    score: float  # 0..1
    name_score: float | None
    matched: tuple[str, ...]  # exact fields that matched: "date_of_birth", "phone", "mrn"


@dataclass(frozen=True)
class EventMatch:
    event: ClinicalEvent
    similarity: float


def name_score(said: str, record: PatientRecord) -> float:
    """How well a spoken name fits the record, 0..1 (a surname alone can fit fully)."""
    full = record.full_name.lower()
    said = said.lower().strip()
    whole = fuzz.token_sort_ratio(said, full)
    if len(said.split()) == 1:  # one word: either name, alone
        whole = max(whole, fuzz.ratio(said, record.last_name.lower()),
                    fuzz.ratio(said, record.first_name.lower()))
    return whole / 100.0


def score(query: PatientQuery, record: PatientRecord) -> PatientMatch:
    """Rank one candidate on everything the query gave (fields missing count nothing)."""
    parts: list[float] = []
    matched: list[str] = []
    named = name_score(query.name, record) if query.name else None
    if named is not None:
        parts.append(named)
    if query.date_of_birth is not None:
        hit = record.date_of_birth == query.date_of_birth
        parts.append(1.0 if hit else 0.0)
        matched += ["date_of_birth"] if hit else []
    if query.phone is not None:
        hit = normalize_phone(record.phone) == normalize_phone(query.phone)
        parts.append(1.0 if hit else 0.0)
        matched += ["phone"] if hit else []
    if query.mrn is not None:
        hit = (record.mrn or "").upper() == query.mrn.upper()
        parts.append(1.0 if hit else 0.0)
        matched += ["mrn"] if hit else []
    total = sum(parts) / len(parts) if parts else 0.0
    return PatientMatch(record, round(total, 3), named, tuple(matched))


@dataclass
class WorldIndex:
    """The embedders every call shares, and the search and indexing over them."""

    sentences: Embedder
    spelling: SpellingEmbedder = field(default_factory=SpellingEmbedder)
    _pending: BackgroundTasks = field(default_factory=BackgroundTasks)

    async def prepare(self, pool: asyncpg.Pool) -> None:
        """The HNSW indexes for the configured models (idempotent; start-up)."""
        await store.ensure_index(pool, "patient_name", self.spelling.model,
                                 self.spelling.dimension)
        for kind in ("patient", "event"):
            await store.ensure_index(pool, kind, self.sentences.model, self.sentences.dimension)

    # --- indexing ----------------------------------------------------------------

    async def index_patients(self, pool: asyncpg.Pool, records: list[PatientRecord]) -> None:
        if not records:
            return
        by_workspace: dict[str, list[PatientRecord]] = {}
        for record in records:
            by_workspace.setdefault(record.workspace_id, []).append(record)
        for workspace_id, group in by_workspace.items():
            names = self.spelling.embed_now([r.full_name for r in group])
            documents = await self.sentences.embed([patient_document(r) for r in group])
            await store.store(pool, "patient_name", workspace_id, self.spelling.model,
                              [(r.id, v) for r, v in zip(group, names, strict=True)])
            await store.store(pool, "patient", workspace_id, self.sentences.model,
                              [(r.id, v) for r, v in zip(group, documents, strict=True)])

    async def index_events(self, pool: asyncpg.Pool,
                           events: list[tuple[str, str, str]]) -> None:
        """(event id, workspace id, summary) each."""
        by_workspace: dict[str, list[tuple[str, str]]] = {}
        for event_id, workspace_id, summary in events:
            by_workspace.setdefault(workspace_id, []).append((event_id, summary))
        for workspace_id, group in by_workspace.items():
            vectors = await self.sentences.embed([summary for _, summary in group])
            await store.store(pool, "event", workspace_id, self.sentences.model,
                              [(i, v) for (i, _), v in zip(group, vectors, strict=True)])

    def index_soon(self, pool: asyncpg.Pool, *, patient_ids: list[str] = (),
                   event_ids: list[str] = ()) -> None:
        """Index these rows in the background (bounded); `backfill` repairs a failure."""
        self._pending.start(self._index_later(pool, list(patient_ids), list(event_ids)),
                            name="world-index")

    async def _index_later(self, pool: asyncpg.Pool, patient_ids: list[str],
                           event_ids: list[str]) -> None:
        try:
            async with asyncio.timeout(INDEX_TIMEOUT_S):
                if patient_ids:
                    await self.index_patients(pool, await world.patients_by_ids(pool, patient_ids))
                if event_ids:
                    events = await world.events_by_ids(pool, event_ids)
                    await self.index_events(pool, [(e.id, e.workspace_id, e.summary)
                                                   for e in events])
        except Exception as error:  # noqa: BLE001 - the backfill embeds it later
            logger.warning(f"world index: deferred to backfill ({type(error).__name__})")

    async def drain(self) -> None:
        """Wait for background indexing (tests, shutdown)."""
        await self._pending.wait()

    async def backfill(self, pool: asyncpg.Pool) -> int:
        """Embed every patient and event that has no vector for the current models."""
        done = 0
        for kind, model in (("patient_name", self.spelling.model),
                            ("patient", self.sentences.model)):
            while ids := await store.patients_missing(pool, kind, model, limit=BACKFILL_BATCH):
                await self.index_patients(pool, await world.patients_by_ids(pool, ids))
                done += len(ids)
        while events := await store.events_missing(pool, self.sentences.model,
                                                   limit=BACKFILL_BATCH):
            await self.index_events(pool, events)
            done += len(events)
        return done

    # --- search ------------------------------------------------------------------

    async def search_patients(
        self, pool: asyncpg.Pool, workspace_id: str, query: PatientQuery, *, limit: int = 5,
    ) -> list[PatientMatch]:
        """Best matches first; a name that fits nothing scores below MIN_NAME_SCORE."""
        if query.empty:
            return []
        candidates: dict[str, PatientRecord] = {}
        if query.name:
            vector = self.spelling.embed_now([query.name])[0]
            near = await store.nearest(pool, "patient_name", workspace_id, self.spelling.model,
                                       vector, limit=NAME_CANDIDATES)
            for record in await world.patients_by_ids(pool, [n.entity_id for n in near]):
                candidates[record.id] = record
        phone = normalize_phone(query.phone) or query.phone if query.phone else None
        for fields in ({"date_of_birth": query.date_of_birth}, {"phone": phone},
                       {"mrn": query.mrn}):
            if any(v is not None for v in fields.values()):
                for record in await world.patients_by_fields(pool, workspace_id, **fields):
                    candidates[record.id] = record
        matches = [score(query, record) for record in candidates.values()]
        matches = [m for m in matches if m.name_score is None or m.name_score >= MIN_NAME_SCORE
                   or m.matched]
        matches.sort(key=lambda m: (-m.score, m.patient.last_name, m.patient.first_name))
        return matches[:limit]

    async def search_events(
        self, pool: asyncpg.Pool, workspace_id: str, text: str, *,
        patient_id: str | None = None, limit: int = 5, min_similarity: float = 0.2,
    ) -> list[EventMatch]:
        vector = (await self.sentences.embed([text]))[0]
        near = await store.nearest(pool, "event", workspace_id, self.sentences.model, vector,
                                   limit=limit, patient_id=patient_id)
        near = [n for n in near if n.similarity >= min_similarity]
        events = {e.id: e for e in await world.events_by_ids(pool, [n.entity_id for n in near])}
        return [EventMatch(events[n.entity_id], n.similarity) for n in near
                if n.entity_id in events]
