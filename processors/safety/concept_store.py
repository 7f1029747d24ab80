"""A workspace's own safety concepts, with their example embeddings (the operator queue
of escalations is `db/control.list_escalations`).

A concept's examples are embedded when it is created (one row per example and model in
`safety_concept_embeddings`, pgvector, the model name and dimension beside each vector).
Reading the concepts for a model that has no embeddings yet (the embedder changed)
computes and stores them then, once. The default concepts live in the code's data file
and are never stored here: they cannot be deleted.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import numpy as np

from db.repositories import as_uuid
from processors.safety.concepts import ConceptSpec, SafetyConcept, default_concepts
from services.embeddings import Embedder


class ConceptError(ValueError):
    """The concept cannot be stored (a default's key, a duplicate)."""


async def create_safety_concept(
    pool: asyncpg.Pool, workspace_id: str, spec: ConceptSpec, embedder: Embedder, *,
    then: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Store a workspace concept with its examples' embeddings (computed now); `then`
    runs in the same transaction once it is stored (its audit row)."""
    if spec.key in {c.key for c in default_concepts()}:
        raise ConceptError(f"{spec.key!r} is a default concept, always active")
    vectors = await embedder.embed(list(spec.examples))
    async with pool.acquire() as conn, conn.transaction():
        try:
            row = await conn.fetchrow(
                """INSERT INTO safety_concepts (workspace_id, key, name, severity, description,
                                                examples)
                   VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at""",
                as_uuid(workspace_id), spec.key, spec.name, spec.severity, spec.description,
                list(spec.examples),
            )
        except asyncpg.UniqueViolationError as error:
            raise ConceptError(f"the workspace already has a concept {spec.key!r}") from error
        await _store_embeddings(conn, row["id"], embedder, vectors)
        if then is not None:
            await then(conn)
    return {"id": str(row["id"]), "key": spec.key, "created_at": row["created_at"]}


async def _store_embeddings(conn: asyncpg.Connection, concept_id: uuid.UUID,
                            embedder: Embedder, vectors: np.ndarray) -> None:
    await conn.executemany(
        """INSERT INTO safety_concept_embeddings (concept_id, model, dimension, example_index,
                                                  embedding)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING""",
        [(concept_id, embedder.model, embedder.dimension, i, vector)
         for i, vector in enumerate(vectors)],
    )


async def delete_safety_concept(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str,
                                key: str) -> dict[str, Any] | None:
    """Delete one of the workspace's concepts; what it was (key, name, severity,
    description, examples), or None when there was no such concept."""
    row = await pool.fetchrow(
        """DELETE FROM safety_concepts WHERE workspace_id = $1 AND key = $2
           RETURNING key, name, severity, description, examples""",
        as_uuid(workspace_id), key)
    return None if row is None else {**dict(row), "examples": _examples(row["examples"])}


async def workspace_concepts(
    pool: asyncpg.Pool, workspace_id: str, embedder: Embedder
) -> list[tuple[SafetyConcept, np.ndarray]]:
    """The workspace's concepts with their embeddings for `embedder`'s model."""
    rows = await pool.fetch(
        """SELECT c.id, c.key, c.name, c.severity, c.description, c.examples,
                  e.example_index, e.embedding
             FROM safety_concepts c
             LEFT JOIN safety_concept_embeddings e
                    ON e.concept_id = c.id AND e.model = $2 AND e.dimension = $3
            WHERE c.workspace_id = $1
            ORDER BY c.created_at, c.key, e.example_index""",
        as_uuid(workspace_id), embedder.model, embedder.dimension,
    )
    grouped: dict[uuid.UUID, list[asyncpg.Record]] = {}
    for row in rows:
        grouped.setdefault(row["id"], []).append(row)
    concepts = []
    for concept_id, concept_rows in grouped.items():
        first = concept_rows[0]
        examples = _examples(first["examples"])
        spec = ConceptSpec(key=first["key"], name=first["name"], severity=first["severity"],
                           description=first["description"], examples=examples)
        stored = [r["embedding"].to_numpy() for r in concept_rows
                  if r["embedding"] is not None]
        if len(stored) == len(examples):
            vectors = np.array(stored, dtype=np.float32)
        else:  # a new embedder: embed once, keep for next time
            vectors = await embedder.embed(examples)
            async with pool.acquire() as conn:
                await _store_embeddings(conn, concept_id, embedder, vectors)
        concepts.append((SafetyConcept.from_spec(spec, workspace_id=workspace_id), vectors))
    return concepts


async def list_safety_concepts(pool: asyncpg.Pool, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's own concepts as stored, oldest first, with the embedding models
    their examples have vectors for (no embedding is computed here)."""
    rows = await pool.fetch(
        """SELECT c.key, c.name, c.severity, c.description, c.examples, c.created_at,
                  COALESCE(array_agg(DISTINCT e.model) FILTER (WHERE e.model IS NOT NULL),
                           '{}') AS embedding_models
             FROM safety_concepts c
             LEFT JOIN safety_concept_embeddings e ON e.concept_id = c.id
            WHERE c.workspace_id = $1
            GROUP BY c.id ORDER BY c.created_at, c.key""",
        as_uuid(workspace_id),
    )
    return [{**dict(r), "examples": _examples(r["examples"]),
             "embedding_models": list(r["embedding_models"])} for r in rows]


def _examples(stored: Any) -> list[str]:
    """A concept's examples column (jsonb: text without the pool's codec)."""
    return json.loads(stored) if isinstance(stored, str) else list(stored)
