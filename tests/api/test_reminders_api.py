"""A clinic's reminders over the API: off until set; set whole by an admin, by call or by
text, with the clinic's appointment types by name or id, audited with the key; a type the
clinic does not have is 422 naming it, and changes nothing; another workspace's clinic
is 404."""

from __future__ import annotations

import uuid

import pytest

from db import reminder_campaigns as campaigns
from db import repositories as repo
from tests.api.app_client import bearer
from tests.api.outbound_world import World, add_clinic, new_world


def path(world: World, clinic_id: str | None = None) -> str:
    return f"/api/clinics/{clinic_id or world.clinic_id}/reminders"


async def type_ids(db, clinic_id: str) -> dict[str, str]:
    rows = await db.pool.fetch("SELECT id, name FROM appointment_types WHERE service_id = $1",
                               uuid.UUID(clinic_id))
    return {row["name"]: str(row["id"]) for row in rows}


async def audit_rows(db, workspace_id: str) -> list[dict]:
    rows = await db.pool.fetch(
        "SELECT actor, action, target, before, after FROM audit_log WHERE workspace_id = $1 "
        "AND action LIKE 'reminder%' ORDER BY id", uuid.UUID(workspace_id))
    return [dict(row) for row in rows]


async def test_a_clinic_has_no_reminder_calls_until_they_are_set(client, world):
    answer = await client.get(path(world), headers=bearer(world.keys["read_only"]))
    assert answer.status_code == 200
    assert answer.json() == {"clinic_id": world.clinic_id, "enabled": False, "channel": "call",
                             "lead_hours": 24, "appointment_types": [], "stored": False}


async def test_an_admin_sets_them_by_type_name_and_the_change_is_audited(client, db, world):
    ids = await type_ids(db, world.clinic_id)
    admin = bearer(world.keys["admin"])
    prefix = (await repo.get_api_key(db.pool, world.keys["admin"]))["prefix"]

    first = await client.put(path(world), headers=admin, json={
        "enabled": True, "lead_hours": 48, "appointment_types": ["vaccination", "Dressing"]})
    second = await client.put(path(world), headers=admin, json={
        "enabled": True, "lead_hours": 6, "appointment_types": [ids["Consultation"]]})
    read = await client.get(path(world), headers=bearer(world.keys["read_only"]))

    assert first.status_code == 200, first.text
    assert first.json()["appointment_types"] == [
        {"id": ids["Vaccination"], "name": "Vaccination"},
        {"id": ids["Dressing"], "name": "Dressing"}]
    assert read.json() == second.json() == {
        "clinic_id": world.clinic_id, "enabled": True, "channel": "call", "lead_hours": 6,
        "appointment_types": [{"id": ids["Consultation"], "name": "Consultation"}],
        "stored": True}
    stored = await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id)
    assert stored == campaigns.Campaign(world.clinic_id, world.workspace_id, True, 6,
                                        (ids["Consultation"],))
    rows = await audit_rows(db, world.workspace_id)
    assert [(r["actor"], r["action"], r["target"]) for r in rows] == [
        (f"key vk_{prefix}", "reminder_campaign.replace", world.clinic_id)] * 2
    assert rows[0]["before"] is None and rows[0]["after"]["lead_hours"] == 48
    assert rows[1]["before"]["lead_hours"] == 48 and rows[1]["after"]["lead_hours"] == 6


async def test_a_clinic_that_texts_its_reminders_says_so_and_the_change_is_audited(
        client, db, world):
    admin = bearer(world.keys["admin"])

    texting = await client.put(path(world), headers=admin, json={
        "enabled": True, "channel": "text", "lead_hours": 24})
    read = await client.get(path(world), headers=bearer(world.keys["read_only"]))
    calling = await client.put(path(world), headers=admin, json={
        "enabled": True, "lead_hours": 24})

    assert texting.status_code == 200, texting.text
    assert texting.json()["channel"] == read.json()["channel"] == "text"
    assert calling.json()["channel"] == "call"  # set whole: a call unless it says text
    stored = await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id)
    assert stored.channel == "call"
    rows = await audit_rows(db, world.workspace_id)
    assert [r["after"]["channel"] for r in rows] == ["text", "call"]
    assert rows[1]["before"]["channel"] == "text"


async def test_a_type_the_clinic_does_not_have_is_refused_by_name(client, db, world):
    other_clinic = await add_clinic(db.pool, world.workspace_id)
    elsewhere = (await type_ids(db, other_clinic))["Consultation"]
    admin = bearer(world.keys["admin"])

    answers = [await client.put(path(world), headers=admin, json={
        "enabled": True, "lead_hours": 24, "appointment_types": ["Vaccination", wrong]})
        for wrong in ("Massage", elsewhere)]

    assert [(a.status_code, a.json()["detail"]) for a in answers] == [
        (422, "not appointment types of this clinic: Massage"),
        (422, f"not appointment types of this clinic: {elsewhere}")]
    assert await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id) is None
    assert await audit_rows(db, world.workspace_id) == []


@pytest.mark.parametrize("body", [
    {"enabled": True, "lead_hours": 0}, {"enabled": True, "lead_hours": 337},
    {"enabled": "sometimes", "lead_hours": 24}, {"lead_hours": 24},
    {"enabled": True, "lead_hours": 24, "appointment_types": ["\x00"]},
    {"enabled": True, "lead_hours": 24, "channel": "sms"},
])
async def test_invalid_settings_are_422(client, db, world, body):
    answer = await client.put(path(world), headers=bearer(world.keys["admin"]), json=body)
    assert answer.status_code == 422
    assert await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id) is None


async def test_another_workspaces_clinic_is_not_found(client, db, world):
    theirs = await new_world(db)
    admin = bearer(world.keys["admin"])
    read = await client.get(path(world, theirs.clinic_id), headers=admin)
    write = await client.put(path(world, theirs.clinic_id), headers=admin,
                             json={"enabled": True, "lead_hours": 24})
    malformed = await client.get(path(world, "not-a-clinic"), headers=admin)

    assert [(a.status_code, a.json()["detail"]) for a in (read, write, malformed)] == [
        (404, "clinic not found")] * 3
    assert await campaigns.get_campaign(db.pool, theirs.workspace_id, theirs.clinic_id) is None


async def test_only_an_admin_changes_them(client, db, world):
    answers = {role: await client.put(path(world), headers=bearer(world.keys[role]),
                                      json={"enabled": True, "lead_hours": 24})
               for role in ("read_only", "operator")}
    assert {role: a.status_code for role, a in answers.items()} == {
        "read_only": 403, "operator": 403}
    assert await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id) is None
