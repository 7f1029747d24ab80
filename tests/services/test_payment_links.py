"""Deposit links through Stripe's SDK against the simulator's stand-in for Stripe: a
deposit is one price and one single-use payment link carrying the appointment, asking
again never makes a second link, a link reads as paid only once the patient paid, every
failure says whether trying again can help (never quoting the key), and only an event
Stripe signed, recently, is believed."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import traceback

import httpx
import pytest
from aiohttp import web
from loguru import logger

from services.payments import (
    Deposit,
    PaymentError,
    StripeLinks,
    WebhookRejected,
    verify_webhook,
)
from simulator.stripe_api import FakeStripe, serve_stripe
from tests.local_http import serve_http

DEPOSIT = Deposit(appointment_id="appt-4711", amount_minor=2500, currency="usd",
                  description="Deposit: physiotherapy, Fri 4 Dec 9:00 AM")


async def test_a_deposit_link_is_one_price_and_one_single_use_link_for_the_appointment():
    fake = FakeStripe()
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        link = await links.create_link(DEPOSIT)

    (price_request,) = fake.posted("/v1/prices")
    assert price_request.form == {"currency": "usd", "unit_amount": "2500",
                                  "product_data[name]": DEPOSIT.description}
    assert price_request.idempotency_key == "deposit-appt-4711-2500-price"
    (price,) = fake.prices.values()
    assert fake.products[price["product"]]["name"] == DEPOSIT.description
    (link_request,) = fake.posted("/v1/payment_links")
    assert link_request.form == {
        "line_items[0][price]": price["id"], "line_items[0][quantity]": "1",
        "metadata[appointment_id]": "appt-4711",
        "restrictions[completed_sessions][limit]": "1"}
    assert link_request.idempotency_key == "deposit-appt-4711-2500-link"
    assert link.id.startswith("plink_") and link.url.startswith("https://buy.stripe.com/test_")
    assert (link.amount_minor, link.currency) == (2500, "usd")
    made = fake.link(link.id)
    assert made["metadata"] == {"appointment_id": "appt-4711"} and made["active"]
    assert made["restrictions"] == {"completed_sessions": {"count": 0, "limit": 1}}


async def test_asking_again_for_the_same_deposit_gives_back_the_same_link():
    fake = FakeStripe()
    async with serve_stripe(fake) as base:
        async with StripeLinks(fake.api_key, api_base=base) as links:
            first = await links.create_link(DEPOSIT)
        async with StripeLinks(fake.api_key, api_base=base) as retrying_job:
            again = await retrying_job.create_link(DEPOSIT)

    assert again == first
    assert len(fake.prices) == len(fake.links) == 1
    assert [r.idempotency_key for r in fake.requests] == [
        "deposit-appt-4711-2500-price", "deposit-appt-4711-2500-link"] * 2


async def test_the_same_appointment_and_amount_described_otherwise_is_refused_not_doubled():
    fake = FakeStripe()
    moved = Deposit(appointment_id="appt-4711", amount_minor=2500, currency="usd",
                    description="Deposit: physiotherapy, Mon 7 Dec 9:00 AM")
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        await links.create_link(DEPOSIT)
        with pytest.raises(PaymentError) as refused:
            await links.create_link(moved)

    assert not refused.value.retryable and refused.value.status == 400
    assert "idempotency key" in refused.value.reason
    assert len(fake.prices) == len(fake.links) == 1


async def test_the_stand_in_replays_a_repeated_request_and_refuses_a_changed_one():
    fake = FakeStripe()
    headers = {"Authorization": f"Bearer {fake.api_key}", "Idempotency-Key": "k-1"}
    form = {"currency": "usd", "unit_amount": "2500", "product_data[name]": "Deposit"}
    async with serve_stripe(fake) as base, httpx.AsyncClient(base_url=base) as http:
        first = await http.post("/v1/prices", data=form, headers=headers)
        again = await http.post("/v1/prices", data=form, headers=headers)
        changed = await http.post("/v1/prices", data={**form, "unit_amount": "3000"},
                                  headers=headers)

    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert changed.status_code == 400
    assert changed.json()["error"]["type"] == "idempotency_error"


async def test_the_stand_in_names_a_missing_parameter_as_stripe_does():
    fake = FakeStripe()
    async with serve_stripe(fake) as base, httpx.AsyncClient(base_url=base) as http:
        answer = await http.post("/v1/prices", data={"currency": "usd"},
                                 auth=(fake.api_key, ""))

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error", "parameter_missing", "unit_amount")


async def test_a_link_reads_unpaid_until_the_patient_pays_and_then_takes_no_more():
    fake = FakeStripe()
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        link = await links.create_link(DEPOSIT)
        before = await links.state(link.id)
        await fake.pay(link.url)
        after = await links.state(link.id)

    assert (before.paid, before.amount_paid_minor, before.sessions) == (False, 0, 0)
    assert (after.paid, after.amount_paid_minor, after.sessions) == (True, 2500, 1)
    listed = [r for r in fake.requests if r.path == "/v1/checkout/sessions"]
    assert [r.form for r in listed] == [{"payment_link": link.id, "limit": "100"}] * 2
    assert not fake.link(link.id)["active"]
    with pytest.raises(ValueError, match="no longer active"):
        await fake.pay(link.id)


async def test_a_patient_who_opened_the_link_but_did_not_pay_has_not_paid():
    fake = FakeStripe()
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        link = await links.create_link(DEPOSIT)
        fake.open_session(link.id)
        state = await links.state(link.id)

    assert (state.paid, state.amount_paid_minor, state.sessions) == (False, 0, 1)


async def test_every_session_of_a_link_opened_many_times_is_read_page_by_page():
    fake = FakeStripe()
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        link = await links.create_link(DEPOSIT)
        opened = [fake.open_session(link.id)["id"] for _ in range(101)]
        state = await links.state(link.id)

    assert (state.paid, state.sessions) == (False, 101)
    listed = [r.form for r in fake.requests if r.path == "/v1/checkout/sessions"]
    assert listed == [{"payment_link": link.id, "limit": "100"},
                      {"payment_link": link.id, "limit": "100", "starting_after": opened[1]}]


class WebhookEndpoint:
    """The service's webhook endpoint: what Stripe posted, and its signature."""

    def __init__(self) -> None:
        self.posted: list[tuple[bytes, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.posted.append((await request.read(), request.headers["Stripe-Signature"]))
        return web.Response(status=200)


async def test_a_payment_posts_a_signed_event_the_service_believes():
    fake = FakeStripe()
    endpoint = WebhookEndpoint()
    app = web.Application()
    app.router.add_post("/stripe/webhook", endpoint.handle)
    async with serve_http(app) as service, serve_stripe(fake) as base, \
            StripeLinks(fake.api_key, api_base=base) as links:
        fake.webhook_to(f"{service}/stripe/webhook")
        link = await links.create_link(DEPOSIT)
        await fake.pay(link.id)

    ((payload, signature),) = endpoint.posted
    event = verify_webhook(payload, signature, fake.webhook_secret)
    assert event["type"] == "checkout.session.completed"
    session = event["data"]["object"]
    assert (session["payment_link"], session["payment_status"], session["amount_total"]) == (
        link.id, "paid", 2500)
    assert [d.status for d in fake.deliveries] == [200]


async def test_a_wrong_key_is_refused_for_good_and_never_quoted():
    fake = FakeStripe()
    wrong = "sk_test_" + "w" * 20 + "9876"
    logged: list[str] = []
    sink = logger.add(logged.append, level="DEBUG")
    try:
        async with serve_stripe(fake) as base, StripeLinks(wrong, api_base=base) as links:
            with pytest.raises(PaymentError) as refused:
                await links.create_link(DEPOSIT)
    finally:
        logger.remove(sink)

    error = refused.value
    assert not error.retryable and error.status == 401 and "API key" in error.reason
    told = "".join(traceback.format_exception(error)) + "".join(logged)
    assert wrong not in told and "9876" not in told and fake.api_key not in told
    assert fake.prices == {} and fake.links == {}


@pytest.mark.parametrize(("status", "error_type"), [
    (400, "invalid_request_error"),
    (403, "invalid_request_error"),
    (404, "invalid_request_error"),
])
async def test_a_request_stripe_refuses_is_not_tried_again(status, error_type):
    fake = FakeStripe()
    async with serve_stripe(fake) as base, StripeLinks(fake.api_key, api_base=base) as links:
        fake.fail_next(status, error_type)
        with pytest.raises(PaymentError) as refused:
            await links.create_link(DEPOSIT)

    assert not refused.value.retryable and refused.value.status == status


@pytest.mark.parametrize("fault", ["rate_limited", "stripe_failed", "unavailable", "stalled",
                                   "junk"])
async def test_a_busy_failing_slow_or_garbled_stripe_may_be_tried_again(fault):
    fake = FakeStripe()
    async with serve_stripe(fake) as base, \
            StripeLinks(fake.api_key, api_base=base, timeout_s=0.3) as links:
        if fault == "rate_limited":
            fake.fail_next(429, "rate_limit_error")
        elif fault == "stripe_failed":
            fake.fail_next(500, "api_error")
        elif fault == "unavailable":
            fake.fail_next(503, "api_error")
        elif fault == "stalled":
            fake.stall_next(1.0)
        else:
            fake.junk_next()
        started = time.monotonic()
        with pytest.raises(PaymentError) as failed:
            await links.create_link(DEPOSIT)
        waited = time.monotonic() - started
        link = await links.create_link(DEPOSIT)

    error = failed.value
    assert error.retryable and waited < 0.9
    assert fake.api_key not in "".join(traceback.format_exception(error))
    if fault == "junk":
        assert "not JSON" in error.reason
    assert link.id in fake.links and len(fake.links) == 1


def signed(payload: bytes, secret: str, at: int) -> str:
    """The v1 signature Stripe puts in `Stripe-Signature` for `payload` sent at `at`."""
    return hmac.new(secret.encode(), f"{at}.".encode() + payload, hashlib.sha256).hexdigest()


EVENT = json.dumps({"id": "evt_1", "object": "event", "type": "checkout.session.completed",
                    "data": {"object": {"id": "cs_test_1", "payment_status": "paid"}}}).encode()
SECRET = "whsec_" + "s" * 32


def test_an_event_signed_with_the_endpoints_secret_is_believed():
    now = int(time.time())
    event = verify_webhook(EVENT, f"t={now},v1={signed(EVENT, SECRET, now)}", SECRET)
    assert event["id"] == "evt_1" and event["data"]["object"]["payment_status"] == "paid"


def test_while_a_secret_is_rolled_one_matching_signature_is_enough():
    now = int(time.time())
    header = (f"t={now},v1={signed(EVENT, 'whsec_old', now)},"
              f"v1={signed(EVENT, SECRET, now)},v0={'0' * 64}")
    assert verify_webhook(EVENT, header, SECRET)["id"] == "evt_1"


@pytest.mark.parametrize(("payload", "header", "why"), [
    (EVENT.replace(b"paid", b"unpaid"), "good", "no v1 signature matches"),
    (EVENT, "wrong secret", "no v1 signature matches"),
    (EVENT, "old", "outside the tolerance"),
    (EVENT, "no v1", "no v1 signature"),
    (EVENT, "no timestamp", "no single timestamp"),
    (b"not json", "good for the body", "not a JSON object"),
])
def test_an_event_tampered_with_forged_or_replayed_later_is_rejected(payload, header, why):
    now = int(time.time())
    headers = {
        "good": f"t={now},v1={signed(EVENT, SECRET, now)}",
        "wrong secret": f"t={now},v1={signed(EVENT, 'whsec_other', now)}",
        "old": f"t={now - 301},v1={signed(EVENT, SECRET, now - 301)}",
        "no v1": f"t={now},v0={signed(EVENT, SECRET, now)}",
        "no timestamp": f"v1={signed(EVENT, SECRET, now)}",
        "good for the body": f"t={now},v1={signed(payload, SECRET, now)}",
    }
    with pytest.raises(WebhookRejected, match=why) as rejected:
        verify_webhook(payload, headers[header], SECRET)
    assert SECRET not in rejected.value.reason


def test_the_stand_in_signs_events_as_stripe_documents():
    fake = FakeStripe()
    header = fake.sign(EVENT)
    timestamp = header.split(",")[0].removeprefix("t=")
    assert header == f"t={timestamp},v1={signed(EVENT, fake.webhook_secret, int(timestamp))}"


@pytest.mark.parametrize("changes", [{"amount_minor": 0}, {"currency": "USD"},
                                     {"appointment_id": ""}])
def test_a_deposit_needs_an_appointment_an_amount_and_an_iso_currency(changes):
    with pytest.raises(ValueError):
        Deposit(**{"appointment_id": "appt-1", "amount_minor": 2500, "currency": "usd",
                   "description": "Deposit", **changes})
