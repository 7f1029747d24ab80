"""The world model's HTTP surface: a call's events, verifying again, the review queue —
each only for the key's own workspace."""

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from config import Settings
from db import practice_writes, scheduling, world
from db import repositories as repo
from db.seed import seed_clinic
from db.world import EventDraft, Provenance
from tests.api.app_client import app_in_testclient

pytestmark = pytest.mark.usefixtures("worker_pools_started")  # app_in_testclient


async def flagged_call(db, workspace_id: str) -> tuple[str, str]:
    """A call in which the agent wrote a phone number the caller never said."""
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    patient = await db.pool.fetchval(
        "INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth) "
        "VALUES ($1, 'Ada', 'Byrne', '1970-01-02') RETURNING id", uuid.UUID(workspace_id))
    await db.pool.execute(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) VALUES "
        "($1, 1, 'caller', 'caller', 'I need to change my phone number please')",
        uuid.UUID(call_id))
    event_id = await world.write_event(db.pool, workspace_id, EventDraft(
        "contact_updated", "Ada Byrne updated contact details: phone +13125550111.",
        {"changes": {"phone": "+13125550111"}}, str(patient)),
        Provenance("tool", "tool:UpdatePatient", "moderate", call_id, 1))
    return call_id, event_id


async def test_events_verification_and_review_queue_stay_in_their_workspace(
        tmp_path, pg_dsn, db, workspace_id):
    call_id, event_id = await flagged_call(db, workspace_id)
    key = await repo.create_api_key(db.pool, workspace_id, "test")
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other_key = await repo.create_api_key(db.pool, other["id"], "test")
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        mine = {"Authorization": f"Bearer {key}"}
        theirs = {"Authorization": f"Bearer {other_key}"}
        events = client.get(f"/api/calls/{call_id}/events", headers=mine)
        hidden = client.get(f"/api/calls/{call_id}/events", headers=theirs)
        anonymous = client.get(f"/api/calls/{call_id}/events")
        not_a_call = client.get("/api/calls/not-a-uuid/events", headers=mine)
        refused = client.post(f"/api/calls/{call_id}/verify", headers=theirs)
        verified = client.post(f"/api/calls/{call_id}/verify", headers=mine)
        queue = client.get("/api/review-queue", headers=mine)
        their_queue = client.get("/api/review-queue", headers=theirs)

    assert events.status_code == 200
    [event] = events.json()
    assert (event["id"], event["written_by"], event["verification"]) == (
        event_id, "tool:UpdatePatient", "pending")
    assert hidden.status_code == refused.status_code == not_a_call.status_code == 404
    assert anonymous.status_code == 401
    assert verified.status_code == 200
    report = verified.json()
    assert report["classification"] == "clinical"
    assert "never said on the call" in report["flagged"][event_id]
    assert [e["id"] for e in queue.json()] == [event_id]
    assert queue.json()[0]["verification"] == "flagged"
    assert their_queue.json() == []


async def test_a_booking_the_practice_system_never_took_is_in_the_review_queue_with_what_to_do(
        tmp_path, pg_dsn, db, workspace_id):
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    await seed_clinic(db.pool, workspace_id, service["id"], date.today())
    priya = (await scheduling.patients_by_phone(db.pool, workspace_id, "+15550100204"))[0]
    physio = next(t for t in await scheduling.appointment_types(db.pool, service["id"])
                  if t.name == "Physiotherapy session")
    slot = (await scheduling.available_slots(
        db.pool, service["id"], appointment_type=physio, first_day=date.today(),
        last_day=date.today() + timedelta(days=13), now=datetime.now(UTC)))[0]
    booked = await scheduling.book(db.pool, slot, patient_id=priya.id, call_id=None)
    action = "Book this appointment in Cliniko by hand (Cliniko server error (503))."
    await practice_writes.flag_unwritten(
        db.pool, await practice_writes.write_state(db.pool, booked.id), system="cliniko",
        reason="Cliniko server error (503)", action=action)
    key = await repo.create_api_key(db.pool, workspace_id, "test", role="operator")
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=pg_dsn)

    with app_in_testclient(settings) as client:
        queue = client.get("/api/review-queue", headers={"Authorization": f"Bearer {key}"})

    [item] = queue.json()
    assert (item["type"], item["source"], item["review_action"]) == (
        "practice_write_failed", "practice", action)
    assert item["summary"].startswith("Not in Cliniko: Physiotherapy session with ")
    assert item["notes"][-1]["reason"] == "Cliniko server error (503)"
