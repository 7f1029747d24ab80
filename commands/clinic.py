"""`clinic import|export|list`: a clinic set up from its file, and written back to one.

    python main.py clinic import FILE --workspace W [--dry-run]
    python main.py clinic export --workspace W [--clinic NAME] [-o FILE]
    python main.py clinic list --workspace W

An import checks the whole file first and prints every problem as `FILE:LINE: reason`
(exit 2, nothing changed); otherwise it applies the file in one transaction and prints
what changed and what to look at (bookings it left outside the new hours).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from commands.database import find_workspace_id, run_with_database
from config import Settings
from db.clinic.file import ClinicFile, ClinicFileInvalid, dump_clinic_yaml, parse_clinic_text
from db.clinic.store import export_clinic, import_clinic, list_clinics
from db.pool import Database


def register(subparsers: argparse._SubParsersAction) -> None:
    clinic = subparsers.add_parser("clinic", help="set up a clinic from its file, or write "
                                                  "one back")
    sub = clinic.add_subparsers(dest="clinic_command", required=True)
    apply = sub.add_parser("import", help="check a clinic file and apply it, all or nothing")
    apply.add_argument("file")
    apply.add_argument("--workspace", required=True)
    apply.add_argument("--dry-run", action="store_true",
                       help="say what would change, change nothing")
    export = sub.add_parser("export", help="write a clinic's set-up as a clinic file")
    export.add_argument("--workspace", required=True)
    export.add_argument("--clinic", default=None,
                        help="the clinic's name (needed when the workspace has several)")
    export.add_argument("-o", "--output", default=None,
                        help="the file to write (default: standard output)")
    listing = sub.add_parser("list", help="list a workspace's clinics")
    listing.add_argument("--workspace", required=True)


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.clinic_command == "import":
        return import_file(settings, args.file, args.workspace, dry_run=args.dry_run)
    if args.clinic_command == "export":
        return export_file(settings, args.workspace, args.clinic, args.output)
    return list_workspace(settings, args.workspace)


def import_file(settings: Settings, file: str, workspace: str, *, dry_run: bool) -> int:
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"error: cannot read {file}: {error}", file=sys.stderr)
        return 2
    try:
        clinic = parse_clinic_text(text, file)
    except ClinicFileInvalid as invalid:
        return _problems(file, invalid)

    async def action(db: Database) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        try:
            result = await import_clinic(db.pool, workspace_id, clinic, dry_run=dry_run)
        except ClinicFileInvalid as invalid:
            return _problems(file, invalid)
        name = clinic.clinic.name
        if dry_run:
            print(f"dry run: nothing was changed; importing {file} would change this:")
        if not result.changes:
            print(f"clinic '{name}': no changes")
        else:
            print(f"clinic '{name}' {'created' if result.created else 'updated'}:")
            for change in result.changes:
                print(f"  {change}")
        for warning in result.warnings:
            print(f"warning: {warning}")
        return 0

    return run_with_database(settings, action)


def export_file(settings: Settings, workspace: str, name: str | None,
                output: str | None) -> int:
    async def action(db: Database) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        clinics = await list_clinics(db.pool, workspace_id)
        chosen = [c for c in clinics if name is None or c["name"] == name]
        if not chosen:
            print(f"no clinic named {name!r} in {workspace}" if name else
                  f"no clinic in {workspace} yet: import one with `clinic import`",
                  file=sys.stderr)
            return 2
        if len(chosen) > 1:
            names = ", ".join(repr(c["name"]) for c in chosen)
            print(f"{workspace} has several clinics ({names}): name one with --clinic",
                  file=sys.stderr)
            return 2
        clinic = await export_clinic(db.pool, workspace_id, chosen[0]["id"])
        return _write(clinic, output) if clinic is not None else 2

    return run_with_database(settings, action)


def list_workspace(settings: Settings, workspace: str) -> int:
    async def action(db: Database) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        for clinic in await list_clinics(db.pool, workspace_id):
            numbers = ", ".join(clinic["phone_numbers"]) or "no number"
            print(f"{clinic['name']}  ({numbers})  {clinic['locations']} locations, "
                  f"{clinic['practitioners']} practitioners, "
                  f"{clinic['appointment_types']} appointment types")
        return 0

    return run_with_database(settings, action)


def _problems(file: str, invalid: ClinicFileInvalid) -> int:
    for problem in invalid.problems:
        print(problem.format(file), file=sys.stderr)
    print(f"{file}: not imported; nothing was changed", file=sys.stderr)
    return 2


def _write(clinic: ClinicFile, output: str | None) -> int:
    """The file on standard output, or written whole to `output` (never half a file)."""
    text = dump_clinic_yaml(clinic)
    if output is None:
        sys.stdout.write(text)
        return 0
    target = Path(output)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        print(f"error: cannot write {output}: {error}", file=sys.stderr)
        return 2
    print(f"wrote {output}")
    return 0
