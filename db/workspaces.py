"""Workspaces as their admins see them: a valid name, the ones a workspace may see (its
own and those it created), and every workspace with its clinics and keys for the
command line."""

from __future__ import annotations

import unicodedata

import asyncpg

from db.repositories import JsonDict, _row_or_none, _rows, as_uuid

NAME_MAX = 100
# Control, format (zero-width, bidi overrides) and surrogate characters, and line breaks
# that are not "\n": never part of a name someone reads on a screen or in a log.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class WorkspaceNameInvalid(ValueError):
    """A workspace name that cannot be used, with the plain reason."""


def clean_workspace_name(name: str) -> str:
    """`name` trimmed; raises `WorkspaceNameInvalid` when it is empty, longer than
    `NAME_MAX` characters, or holds a control character."""
    cleaned = name.strip()
    if not cleaned:
        raise WorkspaceNameInvalid("a workspace name cannot be empty")
    if len(cleaned) > NAME_MAX:
        raise WorkspaceNameInvalid(f"a workspace name has at most {NAME_MAX} characters")
    if any(unicodedata.category(char) in _FORBIDDEN_CATEGORIES for char in cleaned):
        raise WorkspaceNameInvalid("a workspace name cannot hold control characters")
    return cleaned


async def get_workspace(pool: asyncpg.Pool, workspace_id: str) -> JsonDict | None:
    workspace = as_uuid(workspace_id)
    if workspace is None:
        return None
    return _row_or_none(await pool.fetchrow(
        "SELECT id, name, created_at, created_by FROM workspaces WHERE id = $1", workspace))


async def visible_workspaces(pool: asyncpg.Pool, workspace_id: str) -> list[JsonDict]:
    """The workspace itself, then those its admins created, oldest first: never another."""
    return _rows(await pool.fetch(
        """SELECT id, name, created_at, created_by FROM workspaces
           WHERE id = $1 OR created_by = $1
           ORDER BY id <> $1, created_at, name""", as_uuid(workspace_id)))


async def workspaces_with_counts(pool: asyncpg.Pool) -> list[JsonDict]:
    """Every workspace with its number of clinics (services) and of unrevoked keys, by
    name (the command line's view: whoever runs it holds the database)."""
    return _rows(await pool.fetch(
        """SELECT w.id, w.name, w.created_at,
                  (SELECT count(*) FROM services s WHERE s.workspace_id = w.id) AS clinics,
                  (SELECT count(*) FROM api_keys k
                    WHERE k.workspace_id = w.id AND k.revoked_at IS NULL) AS keys
             FROM workspaces w ORDER BY w.name"""))
