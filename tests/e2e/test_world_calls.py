"""The world model in a whole call against the real server (text session): a caller's
new insurance and phone number are captured at moderate confidence, attributed to the
call and the caller's own record only, and verified after the call."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from db import repositories as repo
from db import world
from db.seed import DEMO_WORKSPACE
from runner.dev_credentials import twilio_auth_token
from simulator.simulator import load_script, simulate_call

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


async def verified(db, call_id: str, timeout_s: float = 30.0) -> dict:
    """The after-call verification run and the sync after it (the server starts both once
    the call ends)."""
    async with asyncio.timeout(timeout_s):
        while (run := await world.latest_verification(db.pool, call_id)) is None or (
                await db.pool.fetchval(
                    "SELECT count(*) FROM clinical_events WHERE call_id = $1 AND "
                    "confidence = 'verified' AND synced_at IS NULL", uuid.UUID(call_id))):
            await asyncio.sleep(0.2)
    return run


async def test_new_insurance_and_phone_are_captured_verified_and_attributed(server, db):
    script = load_script(SCENARIOS / "new_insurance_and_phone.yaml")
    demo = await repo.get_workspace_by_name(db.pool, DEMO_WORKSPACE)  # the server's clinic
    walsh = await db.pool.fetchrow(
        "SELECT id, workspace_id FROM patients WHERE workspace_id = $1 AND "
        "phone = '+15550100205' AND last_name = 'Walsh'", uuid.UUID(demo["id"]))
    others_before = await db.pool.fetch(
        "SELECT id, phone, written_by FROM patients WHERE workspace_id = $1 AND id <> $2",
        walsh["workspace_id"], walsh["id"])

    result = await simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=True, log=lambda *_: None)

    assert script.expect.failures(result.to_json_dict()) == []
    agent = [t["text"] for t in result.record["turns"] if t["speaker_role"] == "agent"]
    assert any("pass that on for your record" in line for line in agent)
    run = await verified(db, result.call_id)
    assert run["classification"] == "clinical"
    events = {e.type: e for e in await world.call_events(db.pool, result.call_id)}
    assert set(events) == {"insurance_reported", "contact_reported"}
    for event in events.values():
        assert event.patient_id == str(walsh["id"])  # the caller's own record, nobody else's
        assert (event.source, event.written_by, event.turn_seq) == (
            "extraction", "extraction:rules", event.turn_seq)
        assert event.turn_seq in (1, 2)
        captured = [n for n in event.notes if n["stage"] == "coherence"]
        assert captured and captured[-1]["from"] == "moderate"  # written at moderate
        assert (event.verification, event.confidence) in (
            ("approved", "verified"), ("corrected", "verified"))
    assert events["insurance_reported"].payload["carrier_name"] == "Blue Cross Blue Shield"
    assert events["insurance_reported"].payload["member_id"] == "XJH4482291"
    assert events["contact_reported"].payload["changes"] == {"phone": "+13125550199"}
    # verified → synced into the built-in practice system: the caller's record only
    record = await world.patient_record(db.pool, str(walsh["id"]))
    assert record.phone == "+13125550199"
    others_after = await db.pool.fetch(
        "SELECT id, phone, written_by FROM patients WHERE workspace_id = $1 AND id <> $2",
        walsh["workspace_id"], walsh["id"])
    assert sorted(map(dict, others_after), key=str) == sorted(map(dict, others_before), key=str)
    await db.pool.execute("UPDATE patients SET phone = '+15550100205' WHERE id = $1",
                          uuid.UUID(str(walsh["id"])))  # other tests find Henry by his number
