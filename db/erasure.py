"""Erasing a patient (the right to erasure): their row, and with it everything held about
them. Memories, reminders, appointments, charts, clinical events and call analyses go by
ON DELETE CASCADE; the embeddings of their record, name and events have no foreign key
(they live beside vectors of other kinds) and are deleted here first, as are the words
their calls left as evidence of a misheard keyterm. Calls stay, no longer naming them
(ON DELETE SET NULL)."""

from __future__ import annotations

import asyncpg

from db.repositories import as_uuid


async def erase_patient(conn: asyncpg.Connection, workspace_id: str, patient_id: str) -> bool:
    """Erase the workspace's patient (False: no such patient in this workspace)."""
    key, workspace = as_uuid(patient_id), as_uuid(workspace_id)
    if key is None or workspace is None:
        return False
    if not await conn.fetchval("SELECT 1 FROM patients WHERE id = $1 AND workspace_id = $2",
                               key, workspace):
        return False
    await conn.execute(
        """DELETE FROM world_embeddings
           WHERE (entity_kind IN ('patient', 'patient_name') AND entity_id = $1)
              OR (entity_kind = 'event' AND entity_id IN (
                      SELECT id FROM clinical_events WHERE patient_id = $1))""", key)
    await conn.execute(
        """UPDATE stt_suggestions s SET evidence = COALESCE((
               SELECT jsonb_agg(e) FROM jsonb_array_elements(s.evidence) e
               WHERE NOT EXISTS (SELECT 1 FROM calls c WHERE c.patient_id = $1
                                 AND c.id::text = e->>'call_id')), '[]'::jsonb)
           WHERE s.workspace_id = $2""", key, workspace)
    await conn.execute("DELETE FROM patients WHERE id = $1 AND workspace_id = $2", key,
                       workspace)
    return True
