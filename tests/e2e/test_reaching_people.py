"""Reaching people beyond the call, end to end: the real service, pointed at the Twilio
stand-in, with a simulated caller.

- A booking made on the phone ends with its confirmation text: the stand-in records it
  sent from the clinic's number to the caller's, the caller heard it was texted, and
  the text's status callbacks (signed, to `/sms/status`) bring it to `delivered` in the
  clinic's record.
- A caller who asks for a person while the clinic is open is put through: the location's
  phone (the stand-in's operator) hears a summary of the call and joins the caller in
  the conference; the hand-off is `answered` on record.
- A video visit that takes a deposit, booked on the phone, is texted with its private
  Daily room's link and its Stripe deposit link; Stripe's signed webhook says when it is
  paid, and the patient calling back hears that it is.
"""

from __future__ import annotations

import re
import uuid
from contextlib import AsyncExitStack
from datetime import time as clock

import pytest
import yaml

from db import handoffs, text_messages, visit_links
from db import repositories as repo
from db import scheduling as sched
from db.clinic.file import parse_clinic_text
from db.clinic.store import import_clinic
from services.espeak.engine import synthesize_pcm
from simulator.daily_api import FakeDaily, serve_daily
from simulator.outbound_callee import CallTiming, operator_callee
from simulator.simulator import CallScript, simulate_call
from simulator.stripe_api import FakeStripe, serve_stripe
from simulator.twilio_rest import FakeTwilioRest
from tests.api.clinics import new_number
from tests.e2e.follow_through import (
    Clinic,
    add_clinic,
    clinic_file,
    database_of_its_own,
    eventually,
    service_and_twilio,
)
from tests.e2e.outbound_tasks import afternoon_zone
from tests.e2e.service_process import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def agent_lines(record: dict) -> list[str]:
    return [t["text"] for t in record["turns"] if t["speaker_role"] == "agent"]


async def test_a_booking_made_on_the_phone_ends_with_a_confirmation_text(pg_dsn, tmp_path):
    caller_number = new_number()
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db:
        workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
        key = await repo.create_api_key(db.pool, workspace["id"], "front desk")
        twilio = FakeTwilioRest()
        async with service_and_twilio(db, twilio, tmp_path) as service:
            clinic = await add_clinic(db, workspace["id"], afternoon_zone(), clock(0),
                                      clock(23, 59))
            twilio.add_number(clinic.number)
            call = await simulate_call(CallScript.model_validate({
                "name": "books_and_is_texted", "from": caller_number, "to": clinic.number,
                "turns": [{"say": line} for line in (
                    "Hello, I'd like to book a physio appointment please.", "Jordan", "Lee",
                    "My date of birth is July 4th 1988.", "Yes, that's right.",
                    "Whenever is soonest.", "The first one.", "Yes please.",
                    "No, that's all. Goodbye.")],
            }), base_url=service.url, api_key=key, twilio_token=twilio.auth_token,
                text_mode=True, log=lambda *_: None, account_sid=twilio.account_sid)
            heard = " | ".join(agent_lines(call.record))

            async def delivered() -> list | None:
                texts = await text_messages.for_call(db.pool, call.call_id)
                return texts if texts and texts[0].status == "delivered" else None

            (record,) = await eventually("the text delivered", delivered, 30, service.log)

    booked = next(line for line in agent_lines(call.record) if line.startswith("You're booked"))
    assert "texted the details to your number ending in" in booked, heard
    (text,) = twilio.texts.to(caller_number)
    assert text.resource["from"] == clinic.number
    assert "physiotherapy session" in text.body and "Reply STOP" in text.body
    assert "Jordan" not in text.body  # whoever holds the phone can read it
    assert [status for status, _ in text.callbacks] == ["sent", "delivered"]
    assert all(answered == 204 for _, answered in text.callbacks)
    assert (record.kind, record.sid) == ("confirmation", text.resource["sid"])
    assert [e["type"] for e in call.record["events"] if e["type"] == "text_sent"] == [
        "text_sent"]


BOOKS_A_PHYSIO = ("Hello, I'd like to book a physio appointment please.", "Jordan", "Lee",
                  "My date of birth is July 4th 1988.", "Yes, that's right.",
                  "Whenever is soonest.", "The first one.", "Yes please.",
                  "No, that's all. Goodbye.")


def video_clinic(number: str, zone: str) -> str:
    """A clinic whose physiotherapy sessions are video visits in a Daily room, each with a
    $25 deposit."""
    clinic = yaml.safe_load(clinic_file(f"Harbour Video {uuid.uuid4().hex[:4]}", number, zone,
                                        clock(0), clock(23, 59)))
    clinic["clinic"]["video_visits"] = {"provider": "daily"}
    for kind in clinic["appointment_types"]:
        if kind["name"] == "Physiotherapy session":
            kind.update(video=True, deposit_cents=2500)
    return yaml.safe_dump(clinic)


async def test_a_video_visit_with_a_deposit_is_texted_both_links_and_its_payment_is_known(
        pg_dsn, tmp_path):
    caller_number, clinic_number = new_number(), new_number()
    twilio, daily, stripe = FakeTwilioRest(), FakeDaily(), FakeStripe()
    twilio.add_number(clinic_number)
    port = free_port()
    stripe.webhook_to(f"http://127.0.0.1:{port}/webhooks/stripe")
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db, AsyncExitStack() as stack:
        workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
        key = await repo.create_api_key(db.pool, workspace["id"], "front desk")
        await import_clinic(db.pool, workspace["id"],
                            parse_clinic_text(video_clinic(clinic_number, afternoon_zone())))
        daily_url = await stack.enter_async_context(serve_daily(daily))
        stripe_url = await stack.enter_async_context(serve_stripe(stripe))
        service = await stack.enter_async_context(service_and_twilio(db, twilio, tmp_path, env={
            "DAILY_API_KEY": daily.api_key, "DAILY_API_BASE_URL": daily_url,
            "STRIPE_API_KEY": stripe.api_key, "STRIPE_API_BASE_URL": stripe_url,
            "STRIPE_WEBHOOK_SECRET": stripe.webhook_secret}, port=port))

        def script(name: str, lines: tuple[str, ...]) -> CallScript:
            return CallScript.model_validate({
                "name": name, "from": caller_number, "to": clinic_number,
                "turns": [{"say": line} for line in lines]})

        async def call(name: str, lines: tuple[str, ...]):
            return await simulate_call(
                script(name, lines), base_url=service.url, api_key=key,
                twilio_token=twilio.auth_token, text_mode=True, log=lambda *_: None,
                account_sid=twilio.account_sid)

        booked = await call("books_a_video_visit", BOOKS_A_PHYSIO)
        (text,) = twilio.texts.to(caller_number)
        video_url, deposit_url = re.findall(r"https://\S+", text.body)
        await stripe.pay(deposit_url)

        async def paid() -> visit_links.VisitLink | None:
            links = await visit_links.links_of(db.pool, str(await db.pool.fetchval(
                "SELECT id FROM appointments WHERE created_by_call = $1",
                uuid.UUID(booked.call_id))))
            return links["payment"] if links["payment"].paid_at else None

        await eventually("Stripe's webhook marked the deposit paid", paid, 30, service.log)
        later = await call("asks_about_the_deposit", (
            "Hi, I'm calling to check my deposit went through.", "No, that's all. Goodbye."))

    heard = " | ".join(agent_lines(booked.record))
    assert "link for your video visit and a link to pay the deposit" in heard, heard
    assert daily.token_valid(video_url) and "Video visit:" in text.body
    link = stripe.link(deposit_url)
    assert "Deposit ($25)" in text.body and link["restrictions"]["completed_sessions"][
        "limit"] == 1
    assert [delivery.status for delivery in stripe.deliveries] == [204]
    assert "$25 deposit has been paid" in " | ".join(agent_lines(later.record))


async def open_clinic(db, twilio: FakeTwilioRest) -> tuple[str, Clinic, sched.Location]:
    """A workspace's clinic open all day, its number at the stand-in: the front-desk API
    key, the clinic, and its one location (whose phone a person answers)."""
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    key = await repo.create_api_key(db.pool, workspace["id"], "front desk")
    clinic = await add_clinic(db, workspace["id"], afternoon_zone(), clock(0), clock(23, 59))
    (location,) = await sched.locations(db.pool, clinic.service_id)
    twilio.add_number(clinic.number)
    return key, clinic, location


async def test_a_caller_who_asks_for_a_person_is_put_through_after_the_person_hears_a_summary(
        pg_dsn, tmp_path):
    caller_number = new_number()
    twilio = FakeTwilioRest(timing=CallTiming(speech_scale=0.1))
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db:
        key, clinic, location = await open_clinic(db, twilio)
        twilio.add_callee(location.phone_number, operator_callee(
            ["Hello, this is the front desk. How can I help you today?"], stay_s=6,
            synthesize=synthesize_pcm))
        twilio.inbound_lines[caller_number] = ["I would like to move my appointment please."]
        async with service_and_twilio(db, twilio, tmp_path) as service:
            call = await simulate_call(CallScript.model_validate({
                "name": "asks_for_a_person", "from": caller_number, "to": clinic.number,
                "turns": [{"say": "I want to talk to a real person please."}],
            }), base_url=service.url, api_key=key, twilio_token=twilio.auth_token,
                text_mode=False, log=lambda *_: None, account_sid=twilio.account_sid,
                twilio=twilio, handoff_wait_s=60)

            async def settled() -> list | None:
                found = await handoffs.for_call(db.pool, call.call_id)
                return found if found and found[0].outcome != "dialling" else None

            (handoff,) = await eventually("the hand-off settled", settled, 30, service.log)

            async def both_parties() -> list | None:
                rows = await db.pool.fetch(
                    "SELECT speaker_role, text FROM turns WHERE call_id = $1 AND seq > $2",
                    uuid.UUID(call.call_id), handoff.seq_base)
                return rows if {r["speaker_role"] for r in rows} == {"caller", "operator"} \
                    else None

            parties = await eventually("both parties' words on record", both_parties, 40,
                                       service.log)

    heard = " | ".join(agent_lines(call.record))
    assert "putting you through to our Harbour clinic" in heard, heard
    (placed,) = twilio.placed()
    assert (placed.form["To"], placed.form["From"]) == (location.phone_number, clinic.number)
    person = twilio.outcome(handoff.operator_call_sid)
    assert "phone assistant with a caller for you" in person.heard[0], person.heard
    assert "the caller asked to speak with a person" in person.heard[0]
    assert person.conferences == [handoff.conference]
    assert handoff.outcome == "answered" and handoff.destination == "our Harbour clinic"
    leg = twilio.inbound[next(iter(twilio.inbound))]
    assert leg.conferences == [handoff.conference]  # the caller was put in with them
    # the record keeps the agent's turns, then the caller's and the person's
    assert {row["speaker_role"] for row in parties} == {"caller", "operator"}
    assert all(row["text"].strip() for row in parties)


async def test_a_caller_nobody_answers_for_comes_back_to_the_agent_and_is_called_back(
        pg_dsn, tmp_path):
    caller_number = new_number()
    twilio = FakeTwilioRest(timing=CallTiming(speech_scale=0.1, no_answer_s=1.0))
    async with database_of_its_own(pg_dsn, tmp_path / "db") as db:
        key, clinic, location = await open_clinic(db, twilio)
        twilio.add_callee(location.phone_number, "no_answer")
        async with service_and_twilio(db, twilio, tmp_path) as service:
            call = await simulate_call(CallScript.model_validate({
                "name": "nobody_answers", "from": caller_number, "to": clinic.number,
                "turns": [{"say": line} for line in (
                    "I want to talk to a real person please.",
                    "Please ask the doctor to call me about my blood test.",
                    "Yes, this number is fine.", "Thanks, goodbye.")],
            }), base_url=service.url, api_key=key, twilio_token=twilio.auth_token,
                text_mode=False, log=lambda *_: None, account_sid=twilio.account_sid,
                twilio=twilio, handoff_wait_s=60)
            (handoff,) = await handoffs.for_call(db.pool, call.call_id)
            tasks = await db.pool.fetch(
                "SELECT kind, phone FROM outbound_tasks WHERE source_call = $1",
                uuid.UUID(call.call_id))

    heard = " | ".join(agent_lines(call.record))
    assert handoff.outcome == "no_answer" and handoff.resumed_at is not None
    assert "couldn't reach anyone at our Harbour clinic" in heard, heard
    assert "call you back" in heard.split("couldn't reach anyone")[1], heard
    assert [(t["kind"], t["phone"]) for t in tasks] == [("callback", caller_number)], heard
    events = [e["type"] for e in call.record["events"]]
    assert {"handoff_started", "handoff_outcome", "handoff_taken_back"} <= set(events)
