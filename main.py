"""The command line: serve the app (api/app.py), and the operator's commands.

    python main.py [serve]                        run the service (default)
    python main.py migrate                        apply database migrations
    python main.py seed-demo                      create the demo workspace and clinic
    python main.py workspace create NAME          create a workspace, print its id
    python main.py workspace list                 every workspace, its clinics and keys
    python main.py api-key create --workspace W [--role admin|operator|read_only]
                                                  print a new API key once (admin by default)
    python main.py api-key list|revoke KEY --workspace W
    python main.py clinic import FILE --workspace W [--dry-run]    set up a clinic from its file
    python main.py clinic export --workspace W [--clinic NAME] [-o FILE]
    python main.py clinic list --workspace W
    python main.py twilio connect +1NUMBER --workspace W [--clinic NAME]
    python main.py simulate SCRIPT.yaml [...]     play a caller against a running service
    python main.py simulate --persona PATH [...]  play personas (a file or a folder), judged
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import sys
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from api.app import create_app
from api.server import server_config
from commands import clinic as clinic_commands
from commands import jobs as jobs_commands
from commands import twilio as twilio_commands
from commands import workspace as workspace_commands
from commands.database import find_workspace_id, run_with_database
from config import Settings, setting_name
from lib import log_privacy


def configure_logging(settings: Settings) -> None:
    """PHI masked in every line, no variable values in tracebacks (`lib/log_privacy.py`)."""
    log_privacy.configure_logging(settings.server.log_level)


def serve(settings: Settings) -> int:
    from api.first_minutes import how_to_get_in
    from api.server import DrainingServer
    from pipeline.provider_choice import resolve_providers
    from runner.box import worker_count

    resolve_providers(settings)  # a provider forced without its key: a clear error, not a crash

    workers = worker_count(settings)
    if workers > 1:  # a supervisor and its worker processes behind the one port
        from api.workers import serve_workers

        return serve_workers(settings, workers)
    app = create_app(settings)
    # SIGTERM drains the calls (each hears a last line) before uvicorn closes the sockets.
    DrainingServer(server_config(settings, app),
                   runtime_of=lambda: getattr(app.state, "runtime", None),
                   on_started=lambda port: print(how_to_get_in(settings, port),
                                                 flush=True)).run()
    return 0


def migrate(settings: Settings) -> int:
    async def action(db) -> int:
        print("migrations are up to date")
        return 0

    return run_with_database(settings, action)


def seed(settings: Settings) -> int:
    from db.seed import seed_demo

    async def action(db) -> int:
        result = await seed_demo(db.pool)
        print(f"demo workspace ready: {result}")
        return 0

    return run_with_database(settings, action)


def create_key(settings: Settings, workspace: str, name: str, role: str = "admin") -> int:
    from db import audit
    from db import repositories as repo

    async def action(db) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        async with db.pool.acquire() as conn, conn.transaction():
            key = await repo.create_api_key(conn, workspace_id, name, role=role)
            row = await repo.get_api_key(conn, key)
            await audit.record_change(conn, workspace_id, actor=audit.CLI_ACTOR,
                                      action="api_key.create", target=f"vk_{row['prefix']}",
                                      after={"name": name, "prefix": row["prefix"],
                                             "role": role})
        print(key)  # shown once; only its hash is stored
        return 0

    return run_with_database(settings, action)


def list_keys(settings: Settings, workspace: str) -> int:
    """Print the workspace's keys (never their secrets), newest first."""
    from db import repositories as repo

    async def action(db) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        for key in await repo.list_api_keys(db.pool, workspace_id):
            state = f"revoked {key['revoked_at']}" if key["revoked_at"] else "active"
            print(f"{key['id']}  vk_{key['prefix']}_…  {key['name'] or '-'}  {state}  "
                  f"{key['role']}  last used {key['last_used_at'] or 'never'}")
        return 0

    return run_with_database(settings, action)


def revoke_key(settings: Settings, workspace: str, key: str) -> int:
    """Revoke a key by id or prefix (running pods stop accepting it within 30 s)."""
    from db import audit
    from db import repositories as repo

    async def action(db) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        async with db.pool.acquire() as conn, conn.transaction():
            revoked = await repo.revoke_api_key_by_id(conn, workspace_id, key)
            if revoked is not None:
                await audit.record_change(
                    conn, workspace_id, actor=audit.CLI_ACTOR, action="api_key.revoke",
                    target=f"vk_{revoked['prefix']}", before={
                        "name": revoked["name"], "prefix": revoked["prefix"],
                        "role": revoked["role"]})
        if revoked is None:
            print(f"no active key {key!r} in {workspace}", file=sys.stderr)
            return 2
        print(f"revoked {revoked['id']}")
        return 0

    return run_with_database(settings, action)


def save_graph(settings: Settings, path: str, workspace: str, service: str | None) -> int:
    """Validate a graph file against this engine and store it as a new version."""
    from pathlib import Path

    from db import repositories as repo
    from db.graph_store import GraphVersionExists
    from db.graph_store import save_graph as store
    from flows.catalog import engine_problems
    from flows.graph import GraphError, load_graph

    try:
        graph = load_graph(Path(path))
        problems = engine_problems(graph)
        if problems:
            raise GraphError(f"{path}: " + "; ".join(problems))
    except GraphError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    async def action(db) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        service_id = None
        if service is not None:
            match = await repo.get_service_by_name(db.pool, workspace_id, service)
            if match is None:
                print(f"no service named {service!r}", file=sys.stderr)
                return 2
            service_id = match["id"]
        try:
            version = await store(db.pool, workspace_id, graph.model_dump(mode="json"), service_id)
        except GraphVersionExists as error:
            print(f"error: {error} is already stored; raise `version` in the file", file=sys.stderr)
            return 2
        print(f"stored {graph.id} v{version} for {workspace}" + (f"/{service}" if service else ""))
        return 0

    return run_with_database(settings, action)


def verify_call(settings: Settings, call_id: str) -> int:
    """Run a call's verification again (and sync what is verified); print the report."""
    import json
    from dataclasses import asdict

    from pipeline.providers import ProviderPlan, build_verifier
    from runner.after_call import verify_and_sync
    from services.practice import build_practice

    async def action(db) -> int:
        practice = build_practice(settings, db.pool)
        try:
            report, synced = await verify_and_sync(
                db.pool, call_id, build_verifier(ProviderPlan.from_settings(settings), settings),
                practice, country_code=settings.world.phone_country_code)
        finally:
            if hasattr(practice, "aclose"):
                await practice.aclose()
        if report is None:
            print(f"no call {call_id}", file=sys.stderr)
            return 2
        print(json.dumps({"classification": asdict(report.classification),
                          "judge": report.judge, "counts": report.counts,
                          "flagged": report.flagged, "synced": asdict(synced)}, indent=2))
        return 0

    return run_with_database(settings, action)


def review_queue(settings: Settings, workspace: str, limit: int) -> int:
    """Print the flagged events of a workspace, newest first."""
    from db import world

    async def action(db) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        for event in await world.review_queue(db.pool, workspace_id, limit=limit):
            why = event.notes[-1]["reason"] if event.notes else ""
            action = f" → {event.review_action}" if event.review_action else ""
            print(f"{event.occurred_at:%Y-%m-%d %H:%M} {event.id} {event.type}: {why}{action}")
        return 0

    return run_with_database(settings, action)


# Command groups with a module of their own under commands/: name → module.
COMMAND_GROUPS: dict[str, Any] = {
    "clinic": clinic_commands,
    "jobs": jobs_commands,
    "twilio": twilio_commands,
    "workspace": workspace_commands,
}


def build_parser() -> argparse.ArgumentParser:
    from simulator.personas.run import add_persona_arguments
    from simulator.simulator import add_simulate_arguments

    parser = argparse.ArgumentParser(prog="main.py", description="Clinic voice agent")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="run the service (default)")
    sub.add_parser("migrate", help="apply database migrations")
    sub.add_parser("seed-demo", help="create the demo workspace and clinic")
    api_key = sub.add_parser("api-key", help="manage API keys")
    api_key_sub = api_key.add_subparsers(dest="api_key_command", required=True)
    create = api_key_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--workspace", required=True)
    create.add_argument("--name", default="cli")
    create.add_argument("--role", choices=("admin", "operator", "read_only"), default="admin",
                        help="what the key may do (default admin: full access)")
    listing = api_key_sub.add_parser("list", help="list a workspace's keys")
    listing.add_argument("--workspace", required=True)
    revoke = api_key_sub.add_parser("revoke", help="revoke a key by id or prefix")
    revoke.add_argument("key", help="the key's id, or the 8 characters after vk_")
    revoke.add_argument("--workspace", required=True)
    store = sub.add_parser("save-graph", help="store a context graph file as a new version")
    store.add_argument("path")
    store.add_argument("--workspace", default="demo")
    store.add_argument("--service", default=None, help="only for this service (by name)")
    simulate = sub.add_parser("simulate", help="play a caller script or personas")
    add_simulate_arguments(simulate)
    add_persona_arguments(simulate)
    verify = sub.add_parser("verify-call", help="verify a call's writes again and sync them")
    verify.add_argument("call_id")
    queue = sub.add_parser("review-queue", help="list flagged events awaiting a person")
    queue.add_argument("--workspace", default="demo")
    queue.add_argument("--limit", type=int, default=50)
    for group in COMMAND_GROUPS.values():
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as error:
        problems = "; ".join(
            f"{setting_name(err['loc'])}: {err['msg']}"
            for err in error.errors()
        )
        print(f"invalid settings: {problems}", file=sys.stderr)
        return 2
    except SettingsError as error:
        print(f"invalid settings: {error} ({error.__cause__})", file=sys.stderr)
        return 2
    configure_logging(settings)
    command = args.command or "serve"
    try:
        if command == "serve":
            return serve(settings)
        if command == "migrate":
            return migrate(settings)
        if command == "seed-demo":
            return seed(settings)
        if command == "api-key" and args.api_key_command == "list":
            return list_keys(settings, args.workspace)
        if command == "api-key" and args.api_key_command == "revoke":
            return revoke_key(settings, args.workspace, args.key)
        if command == "api-key":
            return create_key(settings, args.workspace, args.name, args.role)
        if command == "save-graph":
            return save_graph(settings, args.path, args.workspace, args.service)
        if command == "verify-call":
            return verify_call(settings, args.call_id)
        if command == "review-queue":
            return review_queue(settings, args.workspace, args.limit)
        if command in COMMAND_GROUPS:
            return COMMAND_GROUPS[command].run(settings, args)
        if command == "simulate" and args.persona is not None:
            from simulator.personas.run import run_persona_command

            return run_persona_command(args)
        if command == "simulate":
            from simulator.simulator import run_simulate

            return run_simulate(args)
    except ValueError as error:  # e.g. a provider requested without its key
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
