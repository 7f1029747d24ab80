"""Clinic set-up over the API: a whole file imported (checked first), exported and
replaced; each part changed on its own, and nothing else with it; problems answered 422
with their path, changing nothing; another workspace sees and changes nothing; a
read-only key changes nothing; every change audited with the key that made it."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from typing import Any

import pytest

from db import repositories as repo
from db.clinic.file import parse_clinic_data, parse_clinic_text
from tests.api.app_client import bearer, running_app


def clinic_text(name: str, number: str) -> str:
    """A small clinic: two locations, three practitioners, three types, two schedules,
    one closure (one practitioner, one location and one type no schedule uses)."""
    return f"""\
version: 1
clinic:
  name: {name}
  phone_numbers: ["{number}"]
  greeting: Thank you for calling {name}.
locations:
  - name: Harbour
    timezone: Europe/London
    address: 1 Quay Street
    opening_hours: {{mon: ["08:00", "18:00"], tue: ["08:00", "18:00"], wed: ["08:00", "18:00"]}}
  - name: Hilltop
    timezone: Europe/London
    address: 9 Ridge Road
    opening_hours: {{thu: ["09:00", "17:00"]}}
practitioners:
  - {{name: Dr. Ada Byrne, title: GP}}
  - {{name: Dr. Ben Osei, title: GP, years_experience: 4}}
  - {{name: Cara Lind, title: Nurse}}
appointment_types:
  - {{name: Consultation, duration_min: 20, price_cents: 6000, keywords: [consult],
     description: A visit with a GP.}}
  - {{name: Vaccination, duration_min: 10, price_cents: 2500, description: A jab.}}
  - {{name: Dressing, duration_min: 15, price_cents: 1500, description: A wound dressing.}}
schedules:
  - practitioner: Dr. Ada Byrne
    location: Harbour
    days: [mon, tue]
    blocks: [["09:00", "12:00"], ["13:00", "17:00"]]
    offers: [Consultation]
  - practitioner: Dr. Ben Osei
    location: Harbour
    days: [wed]
    blocks: [["08:00", "12:00"]]
    offers: [Consultation, Vaccination]
closures:
  - {{from: "2031-12-25", to: "2031-12-26", reason: the Christmas holiday}}
"""


def as_yaml(key: str, text: str) -> dict[str, Any]:
    """A request's body and headers: `text` as a YAML file, sent with `key`."""
    return {"content": text.encode(),
            "headers": {**bearer(key), "content-type": "application/x-yaml"}}


def fictional_number() -> str:
    return "+1555" + str(uuid.uuid4().int)[:7]


async def key_with_role(db, workspace_id: str, role: str) -> str:
    return await repo.create_api_key(db.pool, workspace_id, f"{role} key", role=role)


@pytest.fixture
async def admin_key(db, workspace_id) -> str:
    return await key_with_role(db, workspace_id, "admin")


@pytest.fixture
def clinic_name() -> str:
    return f"Quayside Surgery {uuid.uuid4().hex[:6]}"


@pytest.fixture
def source(clinic_name) -> str:
    return clinic_text(clinic_name, fictional_number())


async def imported(client, key: str, source: str) -> str:
    response = await client.post("/api/clinics", **as_yaml(key, source))
    assert response.status_code == 201, response.text
    return response.json()["clinic_id"]


async def exported(client, key: str, clinic_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/clinics/{clinic_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    return response.json()


async def audit_rows(db, workspace_id: str) -> list[dict[str, Any]]:
    rows = await db.pool.fetch("SELECT actor, action, target FROM audit_log "
                               "WHERE workspace_id = $1 ORDER BY id", uuid.UUID(workspace_id))
    return [dict(row) for row in rows]


def as_file(text: str) -> dict[str, Any]:
    return parse_clinic_text(text).as_data()


def unordered(file: dict[str, Any]) -> dict[str, Any]:
    """A file's data with each section's items in a fixed order (an export lists them
    in its own order: by name, by date)."""
    return {section: sorted(value, key=lambda item: json.dumps(item, sort_keys=True))
            if isinstance(value, list) else value for section, value in file.items()}


# --- Whole files -------------------------------------------------------------------


async def test_a_file_is_checked_imported_listed_and_exported_as_it_was_written(
        settings, admin_key, source, clinic_name):
    async with running_app(settings) as (_, client):
        checked = await client.post("/api/clinics?dry_run=true", **as_yaml(admin_key, source))
        before = (await client.get("/api/clinics", headers=bearer(admin_key))).json()
        done = await client.post("/api/clinics", **as_yaml(admin_key, source))
        clinic_id = done.json()["clinic_id"]
        listed = (await client.get("/api/clinics", headers=bearer(admin_key))).json()
        as_json = await exported(client, admin_key, clinic_id)
        download = await client.get(f"/api/clinics/{clinic_id}?format=yaml",
                                    headers=bearer(admin_key))
        again = await client.post("/api/clinics", headers=bearer(admin_key),
                                  json=as_json)

    assert checked.status_code == 200 and checked.json()["dry_run"] is True
    assert checked.json()["created"] is True and checked.json()["clinic_id"] is None
    assert checked.json()["changes"] and before == []  # a dry run applies nothing
    assert done.status_code == 201 and done.json()["created"] is True
    [summary] = listed
    assert summary["id"] == clinic_id and summary["name"] == clinic_name
    assert (summary["locations"], summary["practitioners"], summary["appointment_types"]) == (
        2, 3, 3)
    assert summary["closures_upcoming"] == 1
    assert unordered(as_json) == unordered(as_file(source))
    assert download.headers["content-type"].startswith("application/x-yaml")
    assert download.headers["content-disposition"].startswith("attachment; filename=")
    assert as_file(download.text) == as_json
    # The exported file, imported again (as JSON this time), changes nothing.
    assert again.status_code == 200
    assert again.json()["created"] is False and again.json()["changes"] == []


async def test_replacing_the_whole_file_keeps_the_clinic_and_its_name(
        settings, admin_key, source):
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        file = await exported(client, admin_key, clinic_id)
        changed = copy.deepcopy(file)
        changed["closures"] = []
        changed.pop("practitioners")  # a section left out is emptied...
        changed["schedules"] = []  # ...and what named it goes with it
        replaced = await client.put(f"/api/clinics/{clinic_id}", headers=bearer(admin_key),
                                    json=changed)
        after = await exported(client, admin_key, clinic_id)
        renamed = copy.deepcopy(after)
        renamed["clinic"]["name"] = "Another Clinic"
        refused = await client.put(f"/api/clinics/{clinic_id}", headers=bearer(admin_key),
                                   json=renamed)

    assert replaced.status_code == 200 and replaced.json()["clinic_id"] == clinic_id
    assert after["closures"] == [] and after.get("practitioners", []) == []
    assert after["locations"] == file["locations"]
    assert refused.status_code == 422
    assert [p["path"] for p in refused.json()["detail"]["problems"]] == ["clinic.name"]


# --- One part at a time ------------------------------------------------------------

NEW_LOCATION = {"name": "Riverside", "timezone": "Europe/London", "address": "3 Mill Lane",
                "opening_hours": {"fri": ["08:00", "12:00"]}}
NEW_SCHEDULE = {"practitioner": "Cara Lind", "location": "Hilltop", "days": ["thu"],
                "blocks": [["09:00", "12:00"]], "offers": ["Dressing"]}

# part → (an item to add, the key of one to change, the change, the key of one to delete).
# Schedules and closures are addressed by position in the part as it is read.
PART_STEPS = {
    "locations": (
        NEW_LOCATION, "Harbour",
        lambda item: {**item, "opening_hours": {**item["opening_hours"],
                                                "mon": ["07:00", "18:00"]}},
        "Hilltop"),
    "practitioners": (
        {"name": "Dr. Dee Moss", "title": "GP"}, "Dr. Ben Osei",
        lambda item: {**item, "years_experience": 5}, "Cara Lind"),
    "appointment-types": (
        {"name": "Blood test", "duration_min": 10, "price_cents": 1800,
         "description": "A blood draw."}, "Vaccination",
        lambda item: {**item, "price_cents": 2750, "keywords": ["jab", "vaccine"]},
        "Dressing"),
    "schedules": (  # read by practitioner: Cara Lind's (new), Dr. Ada Byrne's, Dr. Ben Osei's
        NEW_SCHEDULE, "1", lambda item: {**item, "days": ["mon"]}, "2"),
    "closures": (
        {"from": "2031-08-04", "reason": "staff training", "location": "Hilltop"}, "0",
        lambda item: {**item, "reason": "the Christmas and Boxing Day holidays"}, "0"),
}


def index_of(items: list[dict[str, Any]], part: str, key: str) -> int:
    if part in ("schedules", "closures"):
        return int(key)
    return next(i for i, item in enumerate(items) if item["name"] == key)


def canonical(file: dict[str, Any], section: str, items: list[dict[str, Any]]) -> list[str]:
    """A section's items as the file would hold them (defaults filled in), in any order."""
    data = parse_clinic_data({**file, section: items}).as_data()
    return sorted(json.dumps(item, sort_keys=True) for item in data[section])


@pytest.mark.parametrize("part", list(PART_STEPS))
async def test_each_part_is_added_to_changed_and_deleted_from_alone(
        settings, admin_key, source, part):
    new_item, change_key, change, delete_key = PART_STEPS[part]
    section = part.replace("-", "_")
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        base = f"/api/clinics/{clinic_id}/{part}"
        original = await exported(client, admin_key, clinic_id)
        steps = []
        for step in ("add", "change", "delete"):
            items = (await client.get(base, headers=bearer(admin_key))).json()
            expected = copy.deepcopy(items)
            if step == "add":
                expected.append(new_item)
                answer = await client.post(base, json=new_item, headers=bearer(admin_key))
            elif step == "change":
                index = index_of(items, part, change_key)
                expected[index] = change(items[index])
                answer = await client.put(f"{base}/{change_key}", json=expected[index],
                                          headers=bearer(admin_key))
            else:
                del expected[index_of(items, part, delete_key)]
                answer = await client.delete(f"{base}/{delete_key}", headers=bearer(admin_key))
            steps.append((step, answer, expected, await exported(client, admin_key, clinic_id)))

    for step, answer, expected, after in steps:
        assert answer.status_code == (201 if step == "add" else 200), answer.text
        assert answer.json()["changes"], (step, answer.text)
        assert canonical(after, section, after[section]) == canonical(after, section, expected)
        assert {k: v for k, v in after.items() if k != section} == {
            k: v for k, v in original.items() if k != section}, step


async def test_the_clinic_header_is_replaced_alone(settings, admin_key, source):
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        original = await exported(client, admin_key, clinic_id)
        header = {**original["clinic"], "greeting": "Quayside, good morning.",
                  "phone_numbers": [*original["clinic"]["phone_numbers"], fictional_number()]}
        replaced = await client.put(f"/api/clinics/{clinic_id}/clinic", json=header,
                                    headers=bearer(admin_key))
        read = await client.get(f"/api/clinics/{clinic_id}/clinic", headers=bearer(admin_key))
        added = await client.post(f"/api/clinics/{clinic_id}/clinic", json=header,
                                  headers=bearer(admin_key))
        after = await exported(client, admin_key, clinic_id)

    assert replaced.status_code == 200 and replaced.json()["changes"]
    assert read.json() == after["clinic"] == header
    assert added.status_code == 405  # one object: replaced, never added to
    assert {k: v for k, v in after.items() if k != "clinic"} == {
        k: v for k, v in original.items() if k != "clinic"}


async def test_items_are_found_by_name_or_position_and_a_missing_one_is_404(
        settings, admin_key, source):
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        base = f"/api/clinics/{clinic_id}"
        by_name = await client.get(f"{base}/practitioners/Dr.%20Ben%20Osei",
                                   headers=bearer(admin_key))
        any_case = await client.get(f"{base}/practitioners/dr.%20ben%20osei",
                                    headers=bearer(admin_key))
        by_position = await client.get(f"{base}/closures/0", headers=bearer(admin_key))
        missing = [await client.request(method, f"{base}/{path}", headers=bearer(admin_key),
                                        **({"json": {"name": "x"}} if method == "PUT" else {}))
                   for method in ("GET", "PUT", "DELETE")
                   for path in ("practitioners/Nobody", "closures/7", "closures/-1",
                                "schedules/first")]
        twin = await client.post(f"{base}/practitioners", headers=bearer(admin_key),
                                 json={"name": "dr. ada byrne", "title": "GP"})

    assert by_name.json()["name"] == any_case.json()["name"] == "Dr. Ben Osei"
    assert by_position.json()["reason"] == "the Christmas holiday"
    assert {r.status_code for r in missing} == {404}
    assert twin.status_code == 422  # adding never quietly replaces another
    assert twin.json()["detail"]["problems"][0]["path"] == "practitioners[3].name"


# --- Problems ----------------------------------------------------------------------


async def test_problems_are_422_with_their_path_and_line_and_change_nothing(
        settings, db, workspace_id, admin_key, source):
    broken = source.replace("timezone: Europe/London\n    address: 9 Ridge",
                            "timezone: Europe/Atlantis\n    address: 9 Ridge")
    broken = broken.replace("practitioner: Dr. Ben Osei", "practitioner: Dr. Nobody")
    async with running_app(settings) as (_, client):
        refused_file = await client.post("/api/clinics", **as_yaml(admin_key, broken))
        nothing = (await client.get("/api/clinics", headers=bearer(admin_key))).json()
        clinic_id = await imported(client, admin_key, source)
        audited = len(await audit_rows(db, workspace_id))
        before = await exported(client, admin_key, clinic_id)
        outside_hours = {**NEW_SCHEDULE, "location": "Hilltop", "blocks": [["07:00", "12:00"]]}
        refused_edit = await client.post(f"/api/clinics/{clinic_id}/schedules",
                                         json=outside_hours, headers=bearer(admin_key))
        wrong_shape = await client.put(f"/api/clinics/{clinic_id}/locations",
                                       json={"name": "not a list"}, headers=bearer(admin_key))
        bad_hours = await client.put(
            f"/api/clinics/{clinic_id}/locations/Harbour", headers=bearer(admin_key),
            json={**before["locations"][0], "opening_hours": {"mon": ["18:00", "08:00"]}})
        not_json = await client.post("/api/clinics", headers={
            **bearer(admin_key), "content-type": "application/json"}, content=b'{"version": 1,')
        not_utf8 = await client.post("/api/clinics", headers={
            **bearer(admin_key), "content-type": "text/yaml"}, content=b"clinic: \xff\xfe")
        a_list = await client.post("/api/clinics", json=[1, 2], headers=bearer(admin_key))
        form = await client.post("/api/clinics", data={"a": "b"}, headers=bearer(admin_key))
        after = await exported(client, admin_key, clinic_id)

    assert refused_file.status_code == 422 and nothing == []
    problems = refused_file.json()["detail"]["problems"]
    assert {(p["path"], p["line"]) for p in problems} >= {("locations[1].timezone", 12)}
    assert any(p["path"].startswith("schedules[1]") and "Dr. Nobody" in p["message"]
               for p in problems)
    assert all(p["line"] for p in problems)  # a text body: every problem has its line
    assert refused_edit.status_code == 422
    [problem] = refused_edit.json()["detail"]["problems"]
    assert problem["path"].startswith("schedules[2]") and problem["line"] is None
    assert wrong_shape.status_code == bad_hours.status_code == 422
    assert not_json.status_code == not_utf8.status_code == a_list.status_code == 422
    assert form.status_code == 415
    assert after == before
    assert len(await audit_rows(db, workspace_id)) == audited


# --- Who may do what ---------------------------------------------------------------


def write_requests(clinic_id: str, file: dict[str, Any]) -> list[tuple[str, str, dict]]:
    """Every write route, each with a body that would be accepted."""
    base = f"/api/clinics/{clinic_id}"
    closure = {"from": "2031-01-02", "reason": "a training day"}
    return [
        ("POST", "/api/clinics", {"json": file}),
        ("POST", "/api/clinics?dry_run=true", {"json": file}),
        ("PUT", base, {"json": file}),
        ("PUT", f"{base}/clinic", {"json": file["clinic"]}),
        ("PUT", f"{base}/closures", {"json": [closure]}),
        ("POST", f"{base}/closures", {"json": closure}),
        ("PUT", f"{base}/closures/0", {"json": closure}),
        ("DELETE", f"{base}/closures/0", {}),
        ("PUT", f"{base}/locations/Harbour", {"json": file["locations"][0]}),
        ("DELETE", f"{base}/practitioners/Cara%20Lind", {}),
    ]


async def test_another_workspace_sees_nothing_and_changes_nothing(
        settings, db, admin_key, source):
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other_key = await key_with_role(db, other["id"], "admin")
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        before = await exported(client, admin_key, clinic_id)
        theirs = await client.get("/api/clinics", headers=bearer(other_key))
        reads = [await client.get(path, headers=bearer(other_key)) for path in (
            f"/api/clinics/{clinic_id}", f"/api/clinics/{clinic_id}?format=yaml",
            f"/api/clinics/{clinic_id}/locations", f"/api/clinics/{clinic_id}/clinic",
            f"/api/clinics/{clinic_id}/closures/0", "/api/clinics/not-a-uuid",
            f"/api/clinics/{uuid.uuid4()}/locations")]
        writes = [await client.request(method, path, headers=bearer(other_key), **body)
                  for method, path, body in write_requests(clinic_id, before)[2:]]
        after = await exported(client, admin_key, clinic_id)

    assert theirs.json() == []
    assert {r.status_code for r in reads} == {404}
    assert {r.status_code for r in writes} == {404}
    assert after == before


async def test_a_read_only_or_operator_key_reads_but_cannot_change_anything(
        settings, db, workspace_id, admin_key, source):
    read_only = await key_with_role(db, workspace_id, "read_only")
    operator = await key_with_role(db, workspace_id, "operator")
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        before = await exported(client, admin_key, clinic_id)
        audited = len(await audit_rows(db, workspace_id))
        reads = [await client.get(path, headers=bearer(read_only)) for path in (
            "/api/clinics", f"/api/clinics/{clinic_id}", f"/api/clinics/{clinic_id}/schedules")]
        writes = [await client.request(method, path, headers=bearer(key), **body)
                  for key in (read_only, operator)
                  for method, path, body in write_requests(clinic_id, before)]
        after = await exported(client, admin_key, clinic_id)

    assert {r.status_code for r in reads} == {200}
    assert {r.status_code for r in writes} == {403}
    assert after == before
    assert len(await audit_rows(db, workspace_id)) == audited


async def test_every_change_is_audited_with_the_key_that_made_it(
        settings, db, workspace_id, admin_key, source):
    prefix = (await repo.get_api_key(db.pool, admin_key))["prefix"]
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        after_import = await audit_rows(db, workspace_id)
        await client.post(f"/api/clinics/{clinic_id}/closures?dry_run=true",
                          json={"from": "2031-03-01", "reason": "repairs"},
                          headers=bearer(admin_key))
        after_dry_run = await audit_rows(db, workspace_id)
        await client.post(f"/api/clinics/{clinic_id}/closures",
                          json={"from": "2031-03-01", "reason": "repairs"},
                          headers=bearer(admin_key))
        after_edit = await audit_rows(db, workspace_id)

    assert after_import and {row["actor"] for row in after_import} == {f"key vk_{prefix}"}
    assert after_dry_run == after_import
    assert len(after_edit) > len(after_import)
    assert {row["actor"] for row in after_edit} == {f"key vk_{prefix}"}


async def test_two_admins_adding_at_once_both_keep_their_change(settings, admin_key, source):
    async with running_app(settings) as (_, client):
        clinic_id = await imported(client, admin_key, source)
        answers = await asyncio.gather(*(
            client.post(f"/api/clinics/{clinic_id}/closures", headers=bearer(admin_key),
                        json={"from": f"2031-0{month}-01", "reason": f"closed {month}"})
            for month in range(1, 6)))
        after = await exported(client, admin_key, clinic_id)

    assert {a.status_code for a in answers} == {201}
    assert {c["reason"] for c in after["closures"]} >= {f"closed {m}" for m in range(1, 6)}
