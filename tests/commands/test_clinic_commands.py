"""`python main.py clinic import|export|list`, as an operator runs them."""

from __future__ import annotations

import uuid

import pytest

from db import repositories as repo
from db.clinic.file import parse_clinic_text
from db.clinic.store import list_clinics
from tests.db.clinic_files import SMALL_CLINIC, edited, line_with, with_numbers

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def workspace(db) -> dict:
    return await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")


async def test_a_file_with_problems_is_reported_line_by_line_and_nothing_changes(
        cli, db, workspace, tmp_path, capsys):
    text = edited(with_numbers(SMALL_CLINIC, "Broken Clinic"),
                  ("timezone: America/New_York", "timezone: Atlantis/Capital"),
                  ("practitioner: Cy Bell", "practitioner: Cy Belle"))
    path = tmp_path / "clinic.yaml"
    path.write_text(text)

    status = await cli("clinic", "import", str(path), "--workspace", workspace["name"])

    err = capsys.readouterr().err.splitlines()
    assert status == 2
    assert err == [
        (f"{path}:{line_with(text, 'Atlantis/Capital')}: unknown timezone 'Atlantis/Capital' "
        "(a name from the tz database, e.g. America/Chicago)"),
        (f"{path}:{line_with(text, 'Cy Belle')}: unknown practitioner 'Cy Belle': "
        "did you mean 'Cy Bell'?"),
        f"{path}: not imported; nothing was changed"]
    assert await list_clinics(db.pool, workspace["id"]) == []


async def test_import_dry_run_list_and_export_round_trip(cli, db, workspace, tmp_path, capsys):
    name = workspace["name"]
    path, out = tmp_path / "clinic.yaml", tmp_path / "exported.yaml"
    text = with_numbers(SMALL_CLINIC, "Harbor Clinic")
    path.write_text(text)

    assert await cli("clinic", "import", str(path), "--workspace", name, "--dry-run") == 0
    rehearsal = capsys.readouterr().out
    assert await list_clinics(db.pool, workspace["id"]) == []
    assert await cli("clinic", "import", str(path), "--workspace", name) == 0
    applied = capsys.readouterr().out
    assert await cli("clinic", "list", "--workspace", name) == 0
    listed = capsys.readouterr().out
    assert await cli("clinic", "export", "--workspace", name, "-o", str(out)) == 0
    capsys.readouterr()
    assert await cli("clinic", "import", str(out), "--workspace", name) == 0
    again = capsys.readouterr().out

    assert rehearsal.startswith("dry run: nothing was changed")
    assert "clinic 'Harbor Clinic' created:" in applied and "  location 'Main' added" in applied
    number = parse_clinic_text(text).clinic.phone_numbers[0]
    assert listed.strip() == (f"Harbor Clinic  ({number})  2 locations, 2 practitioners, "
                              "2 appointment types")
    assert parse_clinic_text(out.read_text()).clinic.name == "Harbor Clinic"
    assert again.strip() == "clinic 'Harbor Clinic': no changes"


async def test_export_needs_the_clinics_name_when_there_are_several(
        cli, db, workspace, tmp_path, capsys):
    name = workspace["name"]
    for clinic in ("North Clinic", "South Clinic"):
        path = tmp_path / f"{clinic}.yaml"
        path.write_text(with_numbers(SMALL_CLINIC, clinic))
        assert await cli("clinic", "import", str(path), "--workspace", name) == 0
    capsys.readouterr()

    several = await cli("clinic", "export", "--workspace", name)
    err = capsys.readouterr().err
    named = await cli("clinic", "export", "--workspace", name, "--clinic", "South Clinic")
    out = capsys.readouterr().out
    unknown = await cli("clinic", "export", "--workspace", name, "--clinic", "East Clinic")

    assert several == 2 and "name one with --clinic" in err
    assert named == 0 and parse_clinic_text(out).clinic.name == "South Clinic"
    assert unknown == 2


async def test_a_missing_file_or_workspace_is_an_error(cli, workspace, tmp_path, capsys):
    path = tmp_path / "clinic.yaml"
    path.write_text(with_numbers(SMALL_CLINIC, "Lonely Clinic"))
    assert await cli("clinic", "import", str(tmp_path / "nope.yaml"), "--workspace",
                     workspace["name"]) == 2
    assert await cli("clinic", "import", str(path), "--workspace", "no-such-workspace") == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "no workspace named 'no-such-workspace'" in err
