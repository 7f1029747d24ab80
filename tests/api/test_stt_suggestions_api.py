"""Operators decide on proposed keyterms over the API: any key lists them, an operator
accepts (the term joins the service's keyterms and the service's next call is given it)
or rejects (it is never proposed again); each decision is audited, a full keyterm list is
a clear 409, and another workspace's suggestion is not found."""

from __future__ import annotations

import random
import uuid

import pytest

from api.deps import Role
from db import audit
from db import repositories as repo
from db import stt_suggestions as stt
from db.stt_suggestions import Misheard
from services.keyterms import MAX_KEYTERMS
from tests.api.app_client import bearer, running_app
from tests.api.test_roles import quiet_settings, workspace_with_keys


@pytest.fixture
async def app_and_client(tmp_path, pg_dsn, db):
    async with running_app(quiet_settings(tmp_path, pg_dsn)) as (app, client):
        yield app, client


async def clinic_with_misses(db, workspace_id: str, terms: list[str], *,
                             keyterms: list[str] | None = None) -> tuple[dict, dict[str, str]]:
    number = f"+1555{random.randint(1000000, 9999999)}"
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}",
                                        keyterms=keyterms, phone_number=number)
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service["id"], call_sid=None,
        direction="inbound", from_number=None, to_number=number, status="completed")
    await stt.record_misheard(db.pool, workspace_id, service["id"], call_id, [
        Misheard(term, f"not {term.lower()}", 1000 * n, "verification")
        for n, term in enumerate(terms, start=1)])
    found = await stt.list_suggestions(db.pool, workspace_id, service_id=service["id"])
    return service, {s["term"]: s["id"] for s in found}


async def test_an_accepted_term_is_a_keyterm_of_the_services_next_call(app_and_client, db):
    app, client = app_and_client
    workspace_id, keys = await workspace_with_keys(db)
    service, ids = await clinic_with_misses(db, workspace_id, ["Zepbound", "Carverton"],
                                            keyterms=["flu shot"])

    listed = await client.get("/api/stt-suggestions", params={"status": "proposed"},
                              headers=bearer(keys[Role.READ_ONLY]))
    refused = await client.post(f"/api/stt-suggestions/{ids['Zepbound']}/accept",
                                headers=bearer(keys[Role.READ_ONLY]))
    accepted = await client.post(f"/api/stt-suggestions/{ids['Zepbound']}/accept",
                                 headers=bearer(keys[Role.OPERATOR]))
    again = await client.post(f"/api/stt-suggestions/{ids['Zepbound']}/accept",
                              headers=bearer(keys[Role.OPERATOR]))
    profile = await app.state.runtime.resolve_profile(str(uuid.uuid4()),
                                                      service["phone_numbers"][0])

    assert listed.status_code == 200, listed.text
    shown = {s["term"]: s for s in listed.json()}
    assert set(shown) == {"Zepbound", "Carverton"}
    assert shown["Zepbound"]["evidence"] == [{"call_id": shown["Zepbound"]["evidence"][0][
        "call_id"], "heard": "not zepbound", "at_ms": 1000, "source": "verification"}]
    assert shown["Zepbound"]["calls_missed"] == 1
    assert refused.status_code == 403
    assert accepted.status_code == 200, accepted.text
    body = accepted.json()
    assert body["suggestion"]["status"] == "accepted" and body["changed"] is True
    assert body["service_keyterms"] == ["flu shot", "Zepbound"]
    assert again.json()["changed"] is False
    assert again.json()["service_keyterms"] == ["flu shot", "Zepbound"]
    assert "Zepbound" in profile.keyterms and profile.service_id == service["id"]
    [entry] = [e for e in await audit.list_changes(db.pool, workspace_id)
               if e["action"] == "stt_suggestion.accept"]
    prefix = (await repo.get_api_key(db.pool, keys[Role.OPERATOR]))["prefix"]
    assert entry["actor"] == f"key vk_{prefix}" and entry["target"] == ids["Zepbound"]
    assert entry["after"]["keyterms"] == ["flu shot", "Zepbound"]
    proposed = await client.get("/api/stt-suggestions", params={"status": "accepted"},
                                headers=bearer(keys[Role.READ_ONLY]))
    assert [s["term"] for s in proposed.json()] == ["Zepbound"]


async def test_a_rejected_term_is_not_proposed_again_and_cannot_then_be_unaccepted(
        app_and_client, db):
    _, client = app_and_client
    workspace_id, keys = await workspace_with_keys(db)
    service, ids = await clinic_with_misses(db, workspace_id, ["Harrowgate", "Mounjaro"])
    operator = bearer(keys[Role.OPERATOR])

    rejected = await client.post(f"/api/stt-suggestions/{ids['Harrowgate']}/reject",
                                 headers=operator)
    await client.post(f"/api/stt-suggestions/{ids['Mounjaro']}/accept", headers=operator)
    unaccept = await client.post(f"/api/stt-suggestions/{ids['Mounjaro']}/reject",
                                 headers=operator)
    later = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service["id"], call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    proposed_again = await stt.record_misheard(db.pool, workspace_id, service["id"], later,
                                               [Misheard("harrowgate", "harrow gate", 10, "x")])

    assert rejected.status_code == 200 and rejected.json()["suggestion"]["status"] == "rejected"
    assert rejected.json()["service_keyterms"] == []
    assert unaccept.status_code == 409 and "accepted" in unaccept.json()["detail"]
    assert proposed_again == 0
    listed = await client.get("/api/stt-suggestions", params={"service_id": service["id"]},
                              headers=operator)
    assert {s["term"]: s["status"] for s in listed.json()} == {
        "Harrowgate": "rejected", "Mounjaro": "accepted"}


async def test_a_full_keyterm_list_refuses_another_with_the_reason(app_and_client, db):
    _, client = app_and_client
    workspace_id, keys = await workspace_with_keys(db)
    full = [f"term {n}" for n in range(MAX_KEYTERMS)]
    service, ids = await clinic_with_misses(db, workspace_id, ["Quillbrook"], keyterms=full)

    answer = await client.post(f"/api/stt-suggestions/{ids['Quillbrook']}/accept",
                               headers=bearer(keys[Role.ADMIN]))

    assert answer.status_code == 409
    assert f"has {MAX_KEYTERMS} keyterms already" in answer.json()["detail"]
    [row] = await stt.list_suggestions(db.pool, workspace_id, service_id=service["id"])
    assert row["status"] == "proposed"
    service_now = await db.pool.fetchval("SELECT keyterms FROM services WHERE id = $1",
                                         uuid.UUID(service["id"]))
    assert service_now == full


async def test_another_workspaces_suggestion_is_not_found(app_and_client, db):
    _, client = app_and_client
    workspace_id, keys = await workspace_with_keys(db)
    other, _other_keys = await workspace_with_keys(db)
    _, theirs = await clinic_with_misses(db, other, ["Ashbourne"])
    operator = bearer(keys[Role.OPERATOR])

    accept = await client.post(f"/api/stt-suggestions/{theirs['Ashbourne']}/accept",
                               headers=operator)
    reject = await client.post(f"/api/stt-suggestions/{theirs['Ashbourne']}/reject",
                               headers=operator)
    nonsense = await client.post("/api/stt-suggestions/not-an-id/accept", headers=operator)
    listed = await client.get("/api/stt-suggestions", headers=operator)

    assert (accept.status_code, reject.status_code, nonsense.status_code) == (404, 404, 404)
    assert listed.json() == []
    [row] = await stt.list_suggestions(db.pool, other)
    assert row["status"] == "proposed"
