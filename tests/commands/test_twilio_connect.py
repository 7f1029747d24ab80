"""`python main.py twilio connect`: a Twilio number pointed at this service and given to a
clinic, against a local stand-in for Twilio's REST API. Every refusal says why, exits 2
and changes nothing in the database (nor at Twilio, where it can be helped)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from db import repositories as repo
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.api.clinics import add_clinic, new_number
from tests.e2e.service_process import free_port

PUBLIC_URL = "https://agent.example.com"


@dataclass
class Setup:
    workspace: str
    workspace_id: str
    clinic: dict
    number: str
    twilio: FakeTwilioRest


@pytest.fixture
async def setup(db, tmp_path, pg_dsn, monkeypatch) -> AsyncIterator[Setup]:
    """A workspace with a clinic, a Twilio account (the stand-in) that owns a number, and
    the command's environment pointing at both."""
    import main

    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    clinic = await add_clinic(db.pool, workspace["id"], "Harbour Clinic")
    number = new_number()
    twilio = FakeTwilioRest()
    twilio.add_number(number)
    async with serve_twilio_rest(twilio) as base_url:
        for name, value in {"DATABASE_URL": pg_dsn, "DATA_DIR": str(tmp_path),
                            "TWILIO_ACCOUNT_SID": twilio.account_sid,
                            "TWILIO_AUTH_TOKEN": twilio.auth_token,
                            "TWILIO_API_BASE_URL": base_url, "PUBLIC_URL": PUBLIC_URL}.items():
            monkeypatch.setenv(name, value)
        # The CLI's logging would outlive the test on capsys's stream (closed after it).
        monkeypatch.setattr(main, "configure_logging", lambda settings: None)
        yield Setup(workspace["name"], workspace["id"], clinic, number, twilio)


async def twilio_connect(*args: str) -> int:
    import main

    return await asyncio.to_thread(main.main, ["twilio", "connect", *args])


async def state(db, setup: Setup) -> tuple:
    """What a refusal must leave as it was: who the number reaches, the audit log."""
    numbers = await db.pool.fetch("SELECT * FROM service_numbers WHERE phone_number = $1",
                                  setup.number)
    audit = await db.pool.fetch("SELECT * FROM audit_log WHERE workspace_id = $1",
                                repo.as_uuid(setup.workspace_id))
    return [dict(r) for r in numbers], [dict(r) for r in audit]


async def test_the_number_is_pointed_at_this_service_and_given_to_the_clinic(db, setup, capsys):
    status = await twilio_connect(setup.number, "--workspace", setup.workspace)

    assert status == 0, capsys.readouterr().err
    [update] = setup.twilio.updates()
    assert update.form == {"VoiceUrl": f"{PUBLIC_URL}/voice/answer", "VoiceMethod": "POST",
                           "StatusCallback": f"{PUBLIC_URL}/voice/status",
                           "StatusCallbackMethod": "POST",
                           "SmsUrl": f"{PUBLIC_URL}/sms/inbound", "SmsMethod": "POST"}
    assert setup.twilio.numbers[next(iter(setup.twilio.numbers))]["sms_url"] == (
        f"{PUBLIC_URL}/sms/inbound")
    [sid] = setup.twilio.numbers
    owner = await repo.find_service_by_phone(db.pool, setup.number)
    assert owner["id"] == setup.clinic["id"]
    row = await db.pool.fetchrow("SELECT * FROM service_numbers WHERE phone_number = $1",
                                 setup.number)
    assert row["twilio_sid"] == sid and row["connected_at"] is not None
    [audit] = await db.pool.fetch("SELECT * FROM audit_log WHERE workspace_id = $1",
                                  repo.as_uuid(setup.workspace_id))
    assert (audit["actor"], audit["action"], audit["target"]) == ("cli", "twilio.connect",
                                                                  setup.number)
    assert audit["before"] is None
    assert audit["after"]["clinic"] == "Harbour Clinic" and audit["after"]["twilio_sid"] == sid
    assert f"connected {setup.number} ({sid}) to Harbour Clinic" in capsys.readouterr().out


async def test_several_clinics_need_the_one_named(db, setup, capsys):
    second = await add_clinic(db.pool, setup.workspace_id, "Quay Clinic")
    before = await state(db, setup)

    ambiguous = await twilio_connect(setup.number, "--workspace", setup.workspace)
    refused = capsys.readouterr().err
    assert ambiguous == 2 and "several clinics" in refused and "--clinic" in refused
    assert "'Harbour Clinic', 'Quay Clinic'" in refused
    assert await state(db, setup) == before and setup.twilio.updates() == []

    named = await twilio_connect(setup.number, "--workspace", setup.workspace,
                                 "--clinic", "Quay Clinic")
    assert named == 0
    assert (await repo.find_service_by_phone(db.pool, setup.number))["id"] == second["id"]


async def test_wrong_twilio_credentials_change_nothing(db, setup, capsys, monkeypatch):
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "not-the-token")
    before = await state(db, setup)

    assert await twilio_connect(setup.number, "--workspace", setup.workspace) == 2

    refused = capsys.readouterr().err
    assert "refused the credentials" in refused
    assert "TWILIO_ACCOUNT_SID" in refused and "TWILIO_AUTH_TOKEN" in refused
    assert await state(db, setup) == before and setup.twilio.updates() == []


async def test_missing_twilio_credentials_are_named(db, setup, capsys, monkeypatch):
    monkeypatch.delenv("TWILIO_AUTH_TOKEN")
    before = await state(db, setup)

    assert await twilio_connect(setup.number, "--workspace", setup.workspace) == 2

    assert "TWILIO_AUTH_TOKEN must be set" in capsys.readouterr().err
    assert await state(db, setup) == before and setup.twilio.requests == []


async def test_a_number_the_twilio_account_does_not_have_changes_nothing(db, setup, capsys):
    elsewhere = new_number()
    setup.number = elsewhere
    before = await state(db, setup)

    assert await twilio_connect(elsewhere, "--workspace", setup.workspace) == 2

    refused = capsys.readouterr().err
    assert f"has no number {elsewhere}" in refused
    assert await state(db, setup) == before and setup.twilio.updates() == []


async def test_an_unreachable_twilio_changes_nothing(db, setup, capsys, monkeypatch):
    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("TWILIO_API_BASE_URL", closed)
    before = await state(db, setup)

    assert await twilio_connect(setup.number, "--workspace", setup.workspace) == 2

    assert f"cannot reach Twilio at {closed}" in capsys.readouterr().err
    assert await state(db, setup) == before


async def test_without_a_public_url_there_is_nothing_to_point_the_number_at(
    db, setup, capsys, monkeypatch
):
    monkeypatch.delenv("PUBLIC_URL")
    before = await state(db, setup)

    assert await twilio_connect(setup.number, "--workspace", setup.workspace) == 2

    assert "PUBLIC_URL is not set" in capsys.readouterr().err
    assert await state(db, setup) == before and setup.twilio.requests == []


async def test_a_number_another_clinic_owns_is_refused(db, setup, capsys):
    other_workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    other = await add_clinic(db.pool, other_workspace["id"], "Other Clinic", setup.number)
    before = await state(db, setup)

    assert await twilio_connect(setup.number, "--workspace", setup.workspace) == 2

    refused = capsys.readouterr().err
    assert "already reaches another clinic" in refused and "'Other Clinic'" in refused
    assert await state(db, setup) == before and setup.twilio.updates() == []
    assert (await repo.find_service_by_phone(db.pool, setup.number))["id"] == other["id"]
