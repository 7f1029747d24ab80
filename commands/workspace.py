"""`workspace create NAME` and `workspace list`: the workspaces of this deployment, made
and seen from the command line (whoever runs it holds the database, so it sees them
all). A workspace created here has no creator and is audited with the actor "cli"."""

from __future__ import annotations

import argparse
import shlex
import sys

import asyncpg

from commands.database import run_with_database
from config import Settings
from db import audit, workspaces
from db import repositories as repo
from db.pool import Database


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("workspace", help="create and list workspaces")
    sub = group.add_subparsers(dest="workspace_command", required=True)
    create = sub.add_parser("create", help="create a workspace and print its id")
    create.add_argument("name")
    sub.add_parser("list", help="list every workspace with its clinics and keys")


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.workspace_command == "create":
        return run_with_database(settings, lambda db: create(db, args.name))
    return run_with_database(settings, list_all)


async def create(db: Database, name: str) -> int:
    try:
        name = workspaces.clean_workspace_name(name)
    except workspaces.WorkspaceNameInvalid as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        async with db.pool.acquire() as conn, conn.transaction():
            workspace = await repo.create_workspace(conn, name)
            await audit.record_change(conn, workspace["id"], actor=audit.CLI_ACTOR,
                                      action="workspace.create", target=workspace["id"],
                                      after={"id": workspace["id"], "name": name})
    except asyncpg.UniqueViolationError:
        print(f"error: a workspace named {name!r} exists", file=sys.stderr)
        return 2
    print(workspace["id"])
    print(f"next: python main.py api-key create --workspace {shlex.quote(name)}",
          file=sys.stderr)
    return 0


async def list_all(db: Database) -> int:
    rows = await workspaces.workspaces_with_counts(db.pool)
    if not rows:
        print("no workspaces yet: python main.py workspace create NAME", file=sys.stderr)
    for row in rows:
        print(f"{row['id']}  {row['name']}  clinics {row['clinics']}  keys {row['keys']}  "
              f"created {row['created_at']}")
    return 0

