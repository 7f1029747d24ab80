"""Twilio's text webhooks: a sent text's status callbacks move its record on (signed, or
403), and STOP texted to a clinic's number stops the workspace's texts to that number
until START, whatever the case or punctuation; other texts change nothing."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from twilio.request_validator import RequestValidator

from config import Settings
from db import repositories as repo
from db import text_messages as texts
from tests.api.app_client import app_in_testclient
from tests.api.clinics import new_number

TOKEN = "0123456789abcdef0123456789abcdef"
BASE = "https://agent.example.com"


@pytest.fixture(scope="module")
def client(tmp_path_factory, pg_dsn):
    settings = Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("texts"),
                        database_url=pg_dsn, twilio_auth_token=TOKEN, public_url=BASE)
    with app_in_testclient(settings, base_url=BASE) as client:
        yield client


def post(client: TestClient, path: str, fields: dict[str, str], *, signed: bool = True):
    headers = ({"X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(
        f"{BASE}{path}", fields)} if signed else {})
    return client.post(path, data=fields, headers=headers)


@pytest.fixture
async def clinic(db) -> tuple[str, str]:
    """A workspace's clinic and the number it owns."""
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    number = new_number()
    await repo.create_service(db.pool, workspace["id"], "Harbour Clinic", phone_number=number)
    return workspace["id"], number


async def test_status_callbacks_move_a_sent_text_on_and_an_unsigned_one_is_refused(
        client, db, clinic):
    workspace_id, number = clinic
    patient = new_number()
    text_id = await texts.begin(db.pool, workspace_id=workspace_id, kind="confirmation",
                                to=patient, from_=number, body="You're booked.")
    sid = "SM" + uuid.uuid4().hex
    await texts.accepted(db.pool, text_id, sid=sid, status="queued")
    fields = {"MessageSid": sid, "MessageStatus": "delivered", "To": patient, "From": number}

    async def status_now() -> str:
        return await db.pool.fetchval("SELECT status FROM text_messages WHERE id = $1",
                                      uuid.UUID(text_id))

    assert post(client, "/sms/status", fields, signed=False).status_code == 403
    assert await status_now() == "queued"
    assert post(client, "/sms/status", fields).status_code == 204
    assert await status_now() == "delivered"


@pytest.mark.parametrize("junk", [{"MessageSid": "SMnothing", "MessageStatus": "sent"},
                                  {"MessageSid": "SMx", "MessageStatus": "teleported"},
                                  {}])
def test_a_status_for_no_text_or_no_status_is_taken_and_changes_nothing(client, junk):
    assert post(client, "/sms/status", junk).status_code == 204


@pytest.mark.parametrize(("stop", "start"), [("STOP", "START"), ("stop.", "Unstop"),
                                             (" Unsubscribe ", "yes"), ("Quit!", "start")])
async def test_stop_texted_to_the_clinic_holds_its_texts_until_start(
        client, db, clinic, stop, start):
    workspace_id, number = clinic
    sender = new_number()

    stopped = post(client, "/sms/inbound", {"From": sender, "To": number, "Body": stop})
    assert stopped.status_code == 200 and "<Response" in stopped.text
    assert not await texts.may_text(db.pool, workspace_id, sender)

    post(client, "/sms/inbound", {"From": sender, "To": number, "Body": start})
    assert await texts.may_text(db.pool, workspace_id, sender)


@pytest.mark.parametrize("body", ["Please stop calling me about the bill",
                                  "Can I move my appointment?", ""])
async def test_other_texts_change_nothing(client, db, clinic, body):
    workspace_id, number = clinic
    sender = new_number()

    answered = post(client, "/sms/inbound", {"From": sender, "To": number, "Body": body})

    assert answered.status_code == 200
    assert await texts.may_text(db.pool, workspace_id, sender)


async def test_stop_to_a_number_no_clinic_owns_is_ignored(client, db):
    sender = new_number()
    answered = post(client, "/sms/inbound", {"From": sender, "To": new_number(),
                                             "Body": "STOP"})
    assert answered.status_code == 200
    assert not await db.pool.fetchval("SELECT count(*) FROM text_opt_outs WHERE phone = $1",
                                      sender)
