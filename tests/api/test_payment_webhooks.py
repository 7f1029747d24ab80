"""Stripe's webhook: a paid Checkout Session marks its deposit link paid the moment Stripe
says so; an event not signed with the endpoint's secret, or too old, changes nothing."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from config import Settings
from db import visit_links
from simulator.stripe_api import FakeStripe
from tests.api.app_client import app_in_testclient
from tests.api.clinics import new_number

SECRET = "whsec_" + "ab" * 16


@pytest.fixture(scope="module")
def client(tmp_path_factory, pg_dsn):
    settings = Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("stripe"),
                        database_url=pg_dsn, stripe_webhook_secret=SECRET)
    with app_in_testclient(settings) as client:
        yield client


async def a_deposit_link(db, demo_clinic) -> visit_links.VisitLink:
    """A booked appointment of the demo clinic with its deposit link kept."""
    workspace_id, service_id = demo_clinic
    row = await db.pool.fetchrow(
        """WITH p AS (INSERT INTO patients (workspace_id, first_name, last_name,
                                            date_of_birth, phone)
                      VALUES ($1, 'Dana', 'Reyes', '1980-02-03', $3) RETURNING id),
                t AS (SELECT id FROM appointment_types WHERE service_id = $2 LIMIT 1),
                pr AS (SELECT id FROM practitioners WHERE service_id = $2 LIMIT 1),
                l AS (SELECT id FROM locations WHERE service_id = $2 LIMIT 1)
           INSERT INTO appointments (patient_id, practitioner_id, location_id,
                                     appointment_type_id, starts_at, ends_at, status)
           SELECT p.id, pr.id, l.id, t.id, $4::timestamptz, $4::timestamptz + interval '30 minutes', 'booked'
           FROM p, t, pr, l RETURNING id""",
        uuid.UUID(workspace_id), uuid.UUID(service_id), new_number(),
        datetime.now(UTC) + timedelta(days=3))
    terms = await visit_links.terms(db.pool, str(row["id"]))
    return await visit_links.keep(db.pool, terms, "payment", provider="stripe",
                                  url="https://buy.stripe.com/test_x",
                                  external_id="plink_" + uuid.uuid4().hex[:12],
                                  amount_cents=2500, currency="USD")


def completed(link_id: str, paid: str = "paid") -> bytes:
    return json.dumps({"id": "evt_1", "type": "checkout.session.completed", "data": {"object": {
        "id": "cs_test_1", "object": "checkout.session", "payment_link": link_id,
        "payment_status": paid, "amount_total": 2500}}}).encode()


def post(client: TestClient, body: bytes, signature: str):
    return client.post("/webhooks/stripe", content=body,
                       headers={"Stripe-Signature": signature,
                                "Content-Type": "application/json"})


async def test_a_paid_session_marks_its_deposit_paid(client, db, demo_clinic):
    link = await a_deposit_link(db, demo_clinic)
    stripe = FakeStripe(webhook_secret=SECRET)
    body = completed(link.external_id)

    answered = post(client, body, stripe.sign(body))

    assert answered.status_code == 204
    kept = await visit_links.link_of(db.pool, link.appointment_id, "payment")
    assert kept.paid_at is not None


@pytest.mark.parametrize("forged", ["wrong secret", "tampered", "stale", "unsigned"])
async def test_an_event_not_from_stripe_changes_nothing(client, db, demo_clinic, forged):
    link = await a_deposit_link(db, demo_clinic)
    stripe = FakeStripe(webhook_secret=SECRET)
    body = completed(link.external_id)
    signature = {
        "wrong secret": stripe.sign(body, secret="whsec_" + "cd" * 16),
        "tampered": stripe.sign(completed(link.external_id, "unpaid")),
        "stale": stripe.sign(body, at=int(time.time()) - 3600),
        "unsigned": "",
    }[forged]

    answered = post(client, body, signature)

    assert answered.status_code == 400
    assert (await visit_links.link_of(db.pool, link.appointment_id, "payment")).paid_at is None


async def test_an_unpaid_session_or_another_event_is_acknowledged_and_ignored(
        client, db, demo_clinic):
    link = await a_deposit_link(db, demo_clinic)
    stripe = FakeStripe(webhook_secret=SECRET)
    unpaid = completed(link.external_id, "unpaid")
    other = json.dumps({"id": "evt_2", "type": "payment_link.updated",
                        "data": {"object": {"id": link.external_id}}}).encode()

    assert post(client, unpaid, stripe.sign(unpaid)).status_code == 204
    assert post(client, other, stripe.sign(other)).status_code == 204
    assert (await visit_links.link_of(db.pool, link.appointment_id, "payment")).paid_at is None
