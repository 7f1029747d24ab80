"""A call to a number no clinic owns never lands in a workspace by accident: with several
clinics it is not answered as any of them (the caller hears the number is not in
service, the call is kept without a workspace), with exactly one clinic it is answered as
that clinic, and a deployment's explicit fallback number names the clinic to answer as.

Each test has a database of its own: how many clinics the deployment has is the point."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from twilio.request_validator import RequestValidator

from config import Settings
from db import repositories as repo
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import seed_demo
from tests.api.app_client import running_app
from tests.api.clinics import add_clinic, new_number
from tests.db.conftest import fresh_dsn  # noqa: F401  (the fixture)

TOKEN = "0123456789abcdef0123456789abcdef"
BASE = "http://test"
CALLER = "+15550100123"


@dataclass
class Deployment:
    db: Database
    settings: Settings

    def with_fallback(self, number: str) -> Settings:
        telephony = self.settings.telephony.model_copy(
            update={"unknown_number_fallback": number})
        return self.settings.model_copy(update={"telephony": telephony})


@pytest.fixture
async def deployment(fresh_dsn, tmp_path) -> AsyncIterator[Deployment]:  # noqa: F811
    """An empty, migrated database and the settings of a service on it."""
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=fresh_dsn,
                        twilio_auth_token=TOKEN, public_url=BASE)
    database = await Database.connect(settings)
    await apply_migrations(database.pool)
    try:
        yield Deployment(database, settings)
    finally:
        await database.close()


async def workspace(db: Database) -> str:
    return (await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}"))["id"]


def ringing(to: str) -> dict[str, str]:
    return {"CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
            "From": CALLER, "To": to, "CallStatus": "ringing"}


async def answer(settings: Settings, form: dict[str, str], *,
                 resolve: tuple[str | None, ...] = ()) -> tuple[ET.Element, list]:
    """Post the signed answer webhook; also the profiles the stream and development paths
    would resolve for each number in `resolve`. The record is written by the time it
    returns (the app's close flushes the writer)."""
    signature = RequestValidator(TOKEN).compute_signature(f"{BASE}/voice/answer", form)
    async with running_app(settings) as (app, client):
        response = await client.post("/voice/answer", data=form,
                                     headers={"X-Twilio-Signature": signature})
        runtime = app.state.runtime
        profiles = [await runtime.resolve_profile(str(uuid.uuid4()), number)
                    for number in resolve]
    assert response.status_code == 200
    return ET.fromstring(response.text), profiles


async def test_a_call_to_an_unknown_number_is_answered_as_neither_of_two_clinics(deployment):
    db = deployment.db
    first = await add_clinic(db.pool, await workspace(db), "North Clinic")
    second = await add_clinic(db.pool, await workspace(db), "South Clinic")
    form = ringing(new_number())

    twiml, (streamed, browser) = await answer(deployment.settings, form,
                                              resolve=(form["To"], None))

    assert twiml.find("./Connect") is None
    assert "not in service" in twiml.find("Say").text and twiml.find("Hangup") is not None
    call = await repo.find_call_by_sid(db.pool, form["CallSid"])
    assert call["workspace_id"] is None and call["service_id"] is None
    assert call["status"] == "completed" and call["ended_at"] is not None
    assert call["completion_reason"] == "number_not_in_service"
    events = await db.pool.fetch("SELECT type, data FROM call_events WHERE call_id = $1",
                                 call["id"])
    assert [(e["type"], e["data"]) for e in events] == [
        ("number_not_in_service", {"fallback_configured": False})]
    # A stream or a browser session that resolves its clinic again gets none either: no
    # workspace, so no chart is ever looked up by the caller's phone.
    for profile in (streamed, browser):
        assert not profile.in_service
        assert profile.workspace_id is None and profile.service_id is None
        assert profile.graph is None
    assert {first["workspace_id"], second["workspace_id"]}.isdisjoint(
        {c["workspace_id"] for c in await db.pool.fetch("SELECT workspace_id FROM calls")})


async def test_with_exactly_one_clinic_an_unknown_number_is_answered_as_it(deployment):
    db = deployment.db
    workspace_id = await workspace(db)
    clinic = await add_clinic(db.pool, workspace_id, "Only Clinic")
    # A line with no location of its own is no clinic: the deployment still has one.
    await repo.create_service(db.pool, workspace_id, "Check-in Line", phone_number=new_number())
    form = ringing(new_number())

    twiml, (browser,) = await answer(deployment.settings, form, resolve=(None,))

    assert twiml.find("./Connect/Stream") is not None
    call = await repo.find_call_by_sid(db.pool, form["CallSid"])
    assert str(call["workspace_id"]) == workspace_id
    assert str(call["service_id"]) == clinic["id"]
    assert (browser.workspace_id, browser.service_id) == (workspace_id, clinic["id"])


async def test_a_configured_fallback_number_names_the_clinic_unknown_numbers_reach(
    deployment
):
    db = deployment.db
    await add_clinic(db.pool, await workspace(db), "North Clinic")
    fallback_workspace = await workspace(db)
    fallback = await add_clinic(db.pool, fallback_workspace, "South Clinic")
    form = ringing(new_number())

    twiml, _ = await answer(deployment.with_fallback(fallback["phone_numbers"][0]), form)

    assert twiml.find("./Connect/Stream") is not None
    call = await repo.find_call_by_sid(db.pool, form["CallSid"])
    assert str(call["workspace_id"]) == fallback_workspace
    assert str(call["service_id"]) == fallback["id"]


async def test_a_number_a_clinic_owns_reaches_it_whatever_the_fallback(deployment):
    db = deployment.db
    owner_workspace = await workspace(db)
    owner = await add_clinic(db.pool, owner_workspace, "North Clinic")
    fallback = await add_clinic(db.pool, await workspace(db), "South Clinic")
    form = ringing(owner["phone_numbers"][0])

    await answer(deployment.with_fallback(fallback["phone_numbers"][0]), form)

    call = await repo.find_call_by_sid(db.pool, form["CallSid"])
    assert (str(call["workspace_id"]), str(call["service_id"])) == (owner_workspace, owner["id"])


async def test_the_development_set_up_answers_any_number_as_the_demo_clinic(deployment):
    seeded = await seed_demo(deployment.db.pool)  # the demo clinic and its check-in line
    form = ringing(new_number())

    twiml, (browser,) = await answer(deployment.settings, form, resolve=(None,))

    assert twiml.find("./Connect/Stream") is not None
    call = await repo.find_call_by_sid(deployment.db.pool, form["CallSid"])
    assert str(call["service_id"]) == seeded.service_id
    assert browser.service_id == seeded.service_id
