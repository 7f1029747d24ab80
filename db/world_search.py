"""Embeddings of patients and events, and nearest-neighbour search over them (pgvector).

Vectors of any model live in one table (`world_embeddings`), the dimension beside
each. The approximate-nearest-neighbour index is an HNSW index per entity kind and
model, partial (`WHERE entity_kind = … AND model = …`) over the vector cast to that
model's dimension, so a model change adds an index and never breaks the old rows.
Queries repeat the index's predicate and cast as literals (a partial index is only
used when the planner can prove its predicate, which parameters do not allow), so
kind and model names are checked against a strict pattern first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import asyncpg
import numpy as np

from db.repositories import as_uuid

EntityKind = Literal["patient", "patient_name", "event"]
KINDS: tuple[EntityKind, ...] = ("patient", "patient_name", "event")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._:-]{1,80}$")
EF_SEARCH = 100  # HNSW candidates per query; results are filtered by workspace after


@dataclass(frozen=True)
class Neighbour:
    entity_id: str
    similarity: float


def _literal(kind: str, model: str, dimension: int) -> tuple[str, str, int]:
    if kind not in KINDS or not _SAFE_NAME.match(model) or not 0 < int(dimension) <= 4000:
        raise ValueError(f"refusing embedding index for {kind!r} / {model!r} / {dimension!r}")
    return kind, model, int(dimension)


def index_name(kind: str, model: str) -> str:
    digest = hashlib.sha1(f"{kind}/{model}".encode()).hexdigest()[:12]
    return f"world_embeddings_ann_{kind}_{digest}"


async def ensure_index(pool: asyncpg.Pool, kind: EntityKind, model: str, dimension: int) -> None:
    """The HNSW index for this kind and model (created once; idempotent)."""
    kind, model, dimension = _literal(kind, model, dimension)
    await pool.execute(
        f"""CREATE INDEX IF NOT EXISTS {index_name(kind, model)} ON world_embeddings
            USING hnsw ((embedding::vector({dimension})) vector_cosine_ops)
            WHERE entity_kind = '{kind}' AND model = '{model}'""")


async def store(
    pool: asyncpg.Pool | asyncpg.Connection, kind: EntityKind, workspace_id: str, model: str,
    rows: Sequence[tuple[str, np.ndarray]],
) -> None:
    """Upsert one vector per entity for `model`."""
    await pool.executemany(
        """INSERT INTO world_embeddings (entity_kind, entity_id, workspace_id, model, dimension,
                                         embedding)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (entity_kind, entity_id, model) DO UPDATE
               SET embedding = EXCLUDED.embedding, dimension = EXCLUDED.dimension""",
        [(kind, as_uuid(entity_id), as_uuid(workspace_id), model, int(len(vector)), vector)
         for entity_id, vector in rows],
    )


async def nearest(
    pool: asyncpg.Pool, kind: EntityKind, workspace_id: str, model: str, vector: np.ndarray,
    *, limit: int = 20, patient_id: str | None = None,
) -> list[Neighbour]:
    """The `limit` entities of the workspace closest to `vector` (cosine), best first.

    `patient_id` narrows event search to one patient's events.
    """
    kind, model, dimension = _literal(kind, model, len(vector))
    scope = ""
    args: list[object] = [vector, as_uuid(workspace_id), limit]
    if patient_id is not None:
        if kind != "event":
            raise ValueError("only events are narrowed to a patient")
        scope = ("AND entity_id IN (SELECT id FROM clinical_events WHERE patient_id = $4 "
                 "AND verification <> 'rejected')")
        args.append(as_uuid(patient_id))
    elif kind == "event":
        scope = ("AND entity_id IN (SELECT id FROM clinical_events WHERE workspace_id = $2 "
                 "AND verification <> 'rejected')")
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
        rows = await conn.fetch(
            f"""SELECT entity_id, 1 - (embedding::vector({dimension}) <=> $1::vector({dimension}))
                       AS similarity
                  FROM world_embeddings
                 WHERE entity_kind = '{kind}' AND model = '{model}' AND workspace_id = $2
                       {scope}
                 ORDER BY embedding::vector({dimension}) <=> $1::vector({dimension})
                 LIMIT $3""",
            *args,
        )
    return [Neighbour(str(row["entity_id"]), float(row["similarity"])) for row in rows]


async def events_missing(pool: asyncpg.Pool, model: str, *, limit: int = 500
                         ) -> list[tuple[str, str, str]]:
    """Events with no vector for `model` yet: (id, workspace id, summary)."""
    rows = await pool.fetch(
        """SELECT e.id, e.workspace_id, e.summary FROM clinical_events e
           WHERE NOT EXISTS (SELECT 1 FROM world_embeddings w WHERE w.entity_kind = 'event'
                             AND w.entity_id = e.id AND w.model = $1)
           ORDER BY e.occurred_at LIMIT $2""", model, limit)
    return [(str(r["id"]), str(r["workspace_id"]), r["summary"]) for r in rows]


async def patients_missing(
    pool: asyncpg.Pool, kind: EntityKind, model: str, *, limit: int = 500
) -> list[str]:
    """Ids of patients with no `kind` vector for `model` yet."""
    rows = await pool.fetch(
        """SELECT p.id FROM patients p
           WHERE NOT EXISTS (SELECT 1 FROM world_embeddings w WHERE w.entity_kind = $1
                             AND w.entity_id = p.id AND w.model = $2)
           ORDER BY p.created_at LIMIT $3""", kind, model, limit)
    return [str(r["id"]) for r in rows]
