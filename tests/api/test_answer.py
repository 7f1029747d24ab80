"""The answer webhook: a retried webhook is the same call; a full process says the lines are busy."""

import uuid
import xml.etree.ElementTree as ET
from contextlib import AbstractContextManager

import pytest
from fastapi.testclient import TestClient
from twilio.request_validator import RequestValidator

from config import Settings
from db import repositories as repo
from tests.api.app_client import app_in_testclient
from tests.api.clinics import several_clinics

pytestmark = pytest.mark.usefixtures("worker_pools_started")  # app_in_testclient

TOKEN = "0123456789abcdef0123456789abcdef"
BASE = "https://agent.example.com"


def answer_form(to: str) -> dict:
    return {
        "CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
        "From": "+15550100123", "To": to, "CallStatus": "ringing",
    }


@pytest.fixture
async def clinic_number(db, workspace_id) -> str:
    """A number a clinic owns (a call to a number no clinic owns is not answered)."""
    number = "+1555" + str(uuid.uuid4().int)[:7]
    await repo.create_service(db.pool, workspace_id, f"Clinic {number}", phone_number=number)
    return number


def post_answer(client: TestClient, form: dict) -> ET.Element:
    signature = RequestValidator(TOKEN).compute_signature(f"{BASE}/voice/answer", form)
    response = client.post("/voice/answer", data=form, headers={"X-Twilio-Signature": signature})
    assert response.status_code == 200
    return ET.fromstring(response.text)


def service(tmp_path, pg_dsn: str, max_calls: int) -> AbstractContextManager[TestClient]:
    settings = Settings(
        _env_file=None, data_dir=tmp_path, database_url=pg_dsn, twilio_auth_token=TOKEN,
        max_concurrent_calls=max_calls, public_url=BASE,
    )
    return app_in_testclient(settings, base_url=BASE)


def streamed_call_id(twiml: ET.Element) -> str:
    return twiml.find("./Connect/Stream/Parameter").get("value")


async def test_a_retried_answer_webhook_connects_the_same_call(tmp_path, pg_dsn, db,
                                                               clinic_number):
    form = answer_form(clinic_number)
    with service(tmp_path, pg_dsn, max_calls=5) as client:
        first, again = post_answer(client, form), post_answer(client, form)
    assert streamed_call_id(first) == streamed_call_id(again)


async def test_a_caller_beyond_capacity_hears_the_lines_are_busy_and_is_on_record(
    tmp_path, pg_dsn, db, clinic_number
):
    taken, turned_away = answer_form(clinic_number), answer_form(clinic_number)
    with service(tmp_path, pg_dsn, max_calls=1) as client:
        accepted = post_answer(client, taken)
        busy = post_answer(client, turned_away)

    assert accepted.find("./Connect/Stream") is not None
    assert busy.find("./Connect") is None
    assert "lines are busy" in busy.find("Say").text and busy.find("Hangup") is not None
    record = await repo.find_call_by_sid(db.pool, turned_away["CallSid"])
    assert record["completion_reason"] == "at_capacity" and record["status"] == "completed"
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 record["id"])
    assert [e["type"] for e in events] == ["at_capacity"]
    assert events[0]["data"]["draining"] is False


async def test_a_caller_turned_away_during_the_shutdown_drain_is_on_record_as_draining(
    tmp_path, pg_dsn, db, clinic_number
):
    turned_away = answer_form(clinic_number)
    with service(tmp_path, pg_dsn, max_calls=5) as client:
        client.portal.call(client.app.state.runtime.drain.begin)  # SIGTERM's drain begins
        busy = post_answer(client, turned_away)

    assert busy.find("./Connect") is None and "lines are busy" in busy.find("Say").text
    record = await repo.find_call_by_sid(db.pool, turned_away["CallSid"])
    assert record["completion_reason"] == "at_capacity" and record["ended_at"] is not None
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 record["id"])
    assert [(e["type"], e["data"]["draining"]) for e in events] == [("at_capacity", True)]


async def test_a_caller_turned_away_busy_is_on_the_dialled_clinics_record(
    tmp_path, pg_dsn, db, workspace_id
):
    clinic_number = "+1555" + str(uuid.uuid4().int)[:7]
    clinic = await repo.create_service(db.pool, workspace_id, "Busy Clinic",
                                       phone_number=clinic_number)
    await several_clinics(db.pool)  # so the number nobody owns reaches no clinic
    taken = answer_form(clinic_number)
    to_clinic = answer_form(clinic_number)
    to_nowhere = answer_form("+1556" + str(uuid.uuid4().int)[:7])
    with service(tmp_path, pg_dsn, max_calls=1) as client:
        post_answer(client, taken)
        post_answer(client, to_clinic)
        post_answer(client, to_nowhere)

    missed = await repo.find_call_by_sid(db.pool, to_clinic["CallSid"])
    unknown = await repo.find_call_by_sid(db.pool, to_nowhere["CallSid"])
    assert str(missed["workspace_id"]) == workspace_id
    assert str(missed["service_id"]) == str(clinic["id"])
    assert missed["completion_reason"] == "at_capacity"
    assert unknown["workspace_id"] is None and unknown["completion_reason"] == "at_capacity"
