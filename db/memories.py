"""A patient's memories across calls: remembered once, strengthened when said again,
fading when not.

A memory is what the patient told a call, in their own words, of a kind (fact,
preference, event, note) and from a source (the agent during the call, or the analysis
after it). Its weight is 1 when last said and halves every half-life since; each later
call that says it again (`reinforcements`) lengthens the half-life by as much again, so
what a patient keeps saying lasts. Recall and search leave out memories below the floor.

A new memory whose embedding is close enough to one of the patient's memories of the
same embedding model, and that names no specific the other lacks (a different day, part
of day, month, body part or name: `data/memory_specifics.yaml`), is that memory said
again: it is reinforced and takes the newer wording and kind, because the latest way a
patient put something is the current one ("mornings, ideally early" after "mornings").
The same call saying it twice reinforces once, so a retried after-call job changes
nothing. An embedder that fails leaves memories stored without a vector (found by their
words) and searches by the words; nothing here raises an embedder's error.

Reads and writes are always scoped to one patient; erasing the patient erases their
memories (ON DELETE CASCADE).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

import asyncpg
import numpy as np
import yaml
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field

from config.memory import MemorySettings

MEMORY_MAX_CHARS = 1000
SPECIFICS_FILE = Path(__file__).resolve().parent / "data" / "memory_specifics.yaml"
Kind = Literal["fact", "preference", "event", "note"]
Source = Literal["agent", "analysis"]
_WORD = re.compile(r"[a-z0-9]{3,}")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'.]*|\d+")
DEFAULT_POLICY = MemorySettings()
# The weight of a memory at $now: halves every half-life ($half) times (1 + reinforcements).
_WEIGHT = ("power(0.5, greatest(extract(epoch FROM ($now::timestamptz - reinforced_at)), 0)"
           " / 86400.0 / ($half::float8 * (1 + reinforcements)))")
_COLUMNS = "id, text, kind, source, created_at, reinforced_at, reinforcements"


class Embedder(Protocol):
    """A sentence embedder (services/embeddings.py): normalised rows, so a dot product is
    the cosine similarity."""

    model: str

    async def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class MemoryCandidate:
    """Something worth remembering, in the patient's words, and the turn that said it."""

    text: str
    kind: Kind
    source: Source = "analysis"
    turn_seq: int | None = None


@dataclass(frozen=True)
class Memory:
    id: str
    text: str
    kind: str
    source: str
    created_at: datetime
    reinforced_at: datetime
    reinforcements: int = 0
    weight: float = 1.0


@dataclass
class Remembered:
    """What one `remember` did: counts only (the words stay in the database)."""

    added: list[str] = field(default_factory=list)  # memory ids
    reinforced: list[str] = field(default_factory=list)
    embedded: bool = True


def _memory(row: asyncpg.Record) -> Memory:
    return Memory(str(row["id"]), row["text"], row["kind"], row["source"], row["created_at"],
                  row["reinforced_at"], row["reinforcements"], float(row["weight"]))


# --- what makes two memories different facts ------------------------------------------


class _Specifics(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int
    groups: dict[str, list[str]] = Field(min_length=1)
    aliases: dict[str, str] = {}
    ignored: list[str] = []


@lru_cache(maxsize=1)
def _specifics(path: Path = SPECIFICS_FILE) -> tuple[frozenset[str], dict[str, str],
                                                      frozenset[str]]:
    data = _Specifics.model_validate(yaml.safe_load(path.read_text()))
    words = frozenset(w.lower() for group in data.groups.values() for w in group)
    unknown = set(data.aliases.values()) - words
    if unknown:
        raise ValueError(f"{path.name}: aliases of no specific: {sorted(unknown)}")
    return words, data.aliases, frozenset(w.lower() for w in data.ignored)


def specifics(text: str) -> frozenset[str]:
    """The days, times, months, body parts and names `text` mentions (lower case)."""
    words, aliases, ignored = _specifics()
    found = set()
    for index, token in enumerate(_TOKEN.findall(text)):
        lower = token.lower().rstrip(".")
        word = aliases.get(lower, lower)
        single = aliases.get(word[:-1], word[:-1]) if word.endswith("s") else word
        if word in words or single in words:
            found.add(word if word in words else single)
        elif token.isdigit() or (index > 0 and token[:1].isupper() and lower not in ignored):
            found.add(lower)
    return frozenset(found)


def different_facts(a: str, b: str) -> bool:
    """Each names a specific the other does not ("Tuesdays" and "Fridays")."""
    first, second = specifics(a), specifics(b)
    return bool(first - second) and bool(second - first)


# --- writing ------------------------------------------------------------------------


@dataclass
class _Known:
    id: str
    text: str
    source_call: str | None
    vector: np.ndarray | None


async def _embed(embedder: Embedder | None, texts: list[str]) -> np.ndarray | None:
    if embedder is None or not texts:
        return None
    try:
        return await embedder.embed(texts)
    except Exception as error:  # noqa: BLE001 - stored without a vector, found by its words
        logger.warning(f"memory: embedding failed ({type(error).__name__}); words only")
        return None


def _array(stored: object) -> np.ndarray | None:
    """A stored vector as numpy (pgvector decodes it as its own `Vector`)."""
    if stored is None:
        return None
    to_numpy = getattr(stored, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else stored, dtype=np.float32)


def _same(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _said_again(candidate: str, vector: np.ndarray | None, known: list[_Known],
                threshold: float) -> _Known | None:
    """The known memory `candidate` says again (None: it is new)."""
    best, best_similarity = None, threshold
    for memory in known:
        if _same(memory.text) == _same(candidate):
            return memory
        if vector is None or memory.vector is None or different_facts(memory.text, candidate):
            continue
        similarity = float(np.dot(vector, memory.vector))
        if similarity >= best_similarity:
            best, best_similarity = memory, similarity
    return best


async def remember(
    pool: asyncpg.Pool, patient_id: str, candidates: list[MemoryCandidate],
    embedder: Embedder | None, call_id: str | None, *,
    policy: MemorySettings = DEFAULT_POLICY,
) -> Remembered:
    """Store what is new and reinforce what the patient said again (see the module)."""
    wanted = [c for c in candidates if c.text.strip()]
    done = Remembered()
    if not wanted:
        return done
    texts = [c.text.strip()[:MEMORY_MAX_CHARS] for c in wanted]
    vectors = await _embed(embedder, texts)
    done.embedded = vectors is not None
    model = embedder.model if vectors is not None and embedder is not None else None
    patient, call = uuid.UUID(patient_id), uuid.UUID(call_id) if call_id else None
    async with pool.acquire() as conn, conn.transaction():
        # one writer per patient at a time: two jobs never both add the same memory
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))",
                           f"memories:{patient_id}")
        rows = await conn.fetch(
            "SELECT id, text, source_call, CASE WHEN model = $2 THEN embedding END AS embedding "
            "FROM memories WHERE patient_id = $1", patient, model)
        known = [_Known(str(r["id"]), r["text"],
                        str(r["source_call"]) if r["source_call"] else None,
                        _array(r["embedding"])) for r in rows]
        for index, (candidate, text) in enumerate(zip(wanted, texts, strict=True)):
            vector = vectors[index] if vectors is not None else None
            again = _said_again(text, vector, known, policy.dedupe_similarity)
            if again is None:
                memory_id = await conn.fetchval(
                    """INSERT INTO memories (patient_id, text, kind, source, source_call,
                                             source_turn, model, embedding)
                       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id""",
                    patient, text, candidate.kind, candidate.source, call,
                    candidate.turn_seq, model, vector)
                known.append(_Known(str(memory_id), text, call_id, vector))
                done.added.append(str(memory_id))
                continue
            counted = again.source_call != call_id or call_id is None
            await conn.execute(
                """UPDATE memories SET text = $2, kind = $3, source = $4, source_call = $5,
                          source_turn = $6, reinforced_at = now(),
                          reinforcements = reinforcements + $9,
                          model = CASE WHEN $8::vector IS NULL THEN model ELSE $7 END,
                          embedding = coalesce($8::vector, embedding)
                   WHERE id = $1""",
                uuid.UUID(again.id), text, candidate.kind, candidate.source, call,
                candidate.turn_seq, model, vector, 1 if counted else 0)
            again.text, again.source_call = text, call_id
            again.vector = vector if vector is not None else again.vector
            if counted and again.id not in done.added:
                done.reinforced.append(again.id)
    logger.info(f"memory: patient {patient_id} call {call_id}: {len(done.added)} added, "
                f"{len(done.reinforced)} reinforced"
                + ("" if done.embedded else " (not embedded)"))
    return done


# --- reading ------------------------------------------------------------------------


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


async def recall(
    pool: asyncpg.Pool, patient_id: str, limit: int = 5, *,
    policy: MemorySettings = DEFAULT_POLICY, now: datetime | None = None,
) -> list[Memory]:
    """The patient's strongest memories (weight at `now`, strongest first)."""
    return await _weighted(pool, patient_id, limit, policy, now, order="weight DESC")


async def recent(
    pool: asyncpg.Pool, patient_id: str, limit: int = 5, *,
    policy: MemorySettings = DEFAULT_POLICY, now: datetime | None = None,
) -> list[Memory]:
    """The patient's memories last said most recently first (faded ones left out)."""
    return await _weighted(pool, patient_id, limit, policy, now, order="reinforced_at DESC")


async def _weighted(pool: asyncpg.Pool, patient_id: str, limit: int, policy: MemorySettings,
                    now: datetime | None, *, order: str) -> list[Memory]:
    weight = _WEIGHT.replace("$now", "$2").replace("$half", "$3")
    rows = await pool.fetch(
        f"""SELECT * FROM (SELECT {_COLUMNS}, {weight} AS weight FROM memories
                           WHERE patient_id = $1) m
            WHERE weight >= $4 ORDER BY {order}, created_at DESC LIMIT $5""",
        uuid.UUID(patient_id), _now(now), policy.half_life_days, policy.floor, limit)
    return [_memory(r) for r in rows]


async def search(
    pool: asyncpg.Pool, patient_id: str, query: str, embedder: Embedder | None,
    limit: int = 3, *, policy: MemorySettings = DEFAULT_POLICY, now: datetime | None = None,
) -> list[Memory]:
    """The patient's memories that answer `query`, best first: by meaning × weight, then
    (memories with no vector of this model) by their words. Only by words when the
    embedder fails."""
    if not _WORD.search(query.lower()):
        return []
    vectors = await _embed(embedder, [query])
    if vectors is None or embedder is None:
        return await _by_words(pool, patient_id, query, limit, policy, now, model=None)
    weight = _WEIGHT.replace("$now", "$3").replace("$half", "$4")
    rows = await pool.fetch(
        f"""SELECT * FROM (
                SELECT {_COLUMNS}, {weight} AS weight,
                       1 - (embedding <=> $2::vector) AS similarity
                  FROM memories
                 WHERE patient_id = $1 AND model = $6 AND vector_dims(embedding) = $8) m
            WHERE weight >= $5 AND similarity >= $7
            ORDER BY similarity * weight DESC LIMIT $9""",
        uuid.UUID(patient_id), np.asarray(vectors[0], dtype=np.float32), _now(now),
        policy.half_life_days, policy.floor, embedder.model, policy.search_similarity,
        int(len(vectors[0])), limit)
    found = [_memory(r) for r in rows]
    if len(found) < limit:
        found += await _by_words(pool, patient_id, query, limit - len(found), policy, now,
                                 model=embedder.model)
    return found


async def _by_words(pool: asyncpg.Pool, patient_id: str, query: str, limit: int,
                    policy: MemorySettings, now: datetime | None, *,
                    model: str | None) -> list[Memory]:
    """Memories sharing any word with `query` (English stemming), best match first;
    with `model`, only those with no vector of that model."""
    words = _WORD.findall(query.lower())
    weight = _WEIGHT.replace("$now", "$4").replace("$half", "$5")
    rows = await pool.fetch(
        f"""SELECT * FROM (
                SELECT {_COLUMNS}, {weight} AS weight,
                       ts_rank(to_tsvector('english', text), query) AS rank
                  FROM memories, to_tsquery('english', $2) AS query
                 WHERE patient_id = $1 AND to_tsvector('english', text) @@ query
                       AND ($7::text IS NULL OR model IS DISTINCT FROM $7)) m
            WHERE weight >= $6 ORDER BY rank * weight DESC, created_at DESC LIMIT $3""",
        uuid.UUID(patient_id), " | ".join(words), limit, _now(now), policy.half_life_days,
        policy.floor, model)
    return [_memory(r) for r in rows]
