"""A video visit's booking ends with a text carrying its own private room's link; a visit
that takes a deposit ends with a text carrying a link to pay it, and the agent can say
whether it has been paid. A provider that fails is said as it is, and a link it could
not make yet is texted by a job once it is ready.

No LLM: calls on the deterministic navigator over the embedded database; Daily, Stripe
and Twilio are their stand-ins, reached through the real adapters.
"""

from __future__ import annotations

import re
import uuid
from types import SimpleNamespace

import pytest

from db import jobs, text_messages, visit_links
from db.visit_links import FINISH_JOB
from runner.visit_link_jobs import finish_visit_links
from tests.flows.callers import PRIYA_PHONE, Caller, call_from
from tests.flows.test_confirmation_texts import books_the_first_morning_physio
from tests.reach_stand_ins import StandIns, reach_through_stand_ins

CLINIC_NUMBER = "+15550100100"
PHYSIO = "Physiotherapy session"


@pytest.fixture
async def providers(db):
    async with reach_through_stand_ins(db.pool, CLINIC_NUMBER) as stand_ins:
        yield stand_ins


async def physio_is(db, clinic, *, video: bool = False, deposit_cents: int | None = None,
                    video_visits: dict | None = None) -> None:
    _, service_id = clinic
    await db.pool.execute("UPDATE services SET video_visits = $2 WHERE id = $1",
                          uuid.UUID(service_id), video_visits or {"provider": "daily"})
    await db.pool.execute(
        "UPDATE appointment_types SET video = $2, deposit_cents = $3 "
        "WHERE service_id = $1 AND name = $4", uuid.UUID(service_id), video, deposit_cents,
        PHYSIO)


async def priya_calls(db, clinic, providers: StandIns) -> Caller:
    return await call_from(db, clinic, PRIYA_PHONE, reach=providers.reach,
                           dialled_number=CLINIC_NUMBER)


def links_in(body: str) -> list[str]:
    return re.findall(r"https://\S+", body)


async def test_a_video_visit_is_texted_with_a_link_to_its_own_private_room(
        db, clinic, providers):
    await physio_is(db, clinic, video=True)
    caller = await priya_calls(db, clinic, providers)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked") and "link for your video visit" in heard
    (text,) = providers.twilio.texts.to(PRIYA_PHONE)
    (url,) = links_in(text.body)
    assert providers.daily.token_valid(url) and "Video visit:" in text.body
    (room,) = providers.daily.rooms.values()
    assert room["privacy"] == "private"
    booking = caller.engine.session.booked[-1]
    kept = await visit_links.link_of(db.pool, booking.id, "video")
    assert (kept.provider, kept.url) == ("daily", url)
    assert [t.name for t in caller.tool_calls()][-3:] == [
        "CreateAppointment", "GetTelehealthLink", "SendTextMessage"]


async def test_a_clinic_with_its_own_video_service_gets_its_link_filled_in(
        db, clinic, providers):
    await physio_is(db, clinic, video=True, video_visits={
        "provider": "link", "link": "https://meet.example.org/demo/{room}"})
    caller = await priya_calls(db, clinic, providers)

    await books_the_first_morning_physio(caller)

    (text,) = providers.twilio.texts.to(PRIYA_PHONE)
    (url,) = links_in(text.body)
    assert re.fullmatch(r"https://meet\.example\.org/demo/visit-[0-9a-f]{12}", url)
    assert providers.daily.requests == []


async def test_an_in_person_visit_gets_no_video_link(db, clinic, providers):
    await physio_is(db, clinic, video=False)
    caller = await priya_calls(db, clinic, providers)

    heard = await books_the_first_morning_physio(caller)

    assert "video" not in heard
    (text,) = providers.twilio.texts.to(PRIYA_PHONE)
    assert links_in(text.body) == [] and providers.daily.requests == []


async def test_a_deposit_link_is_texted_and_the_agent_says_whether_it_is_paid(
        db, clinic, providers):
    await physio_is(db, clinic, deposit_cents=2500)
    caller = await priya_calls(db, clinic, providers)

    heard = await books_the_first_morning_physio(caller)
    (text,) = providers.twilio.texts.to(PRIYA_PHONE)
    (url,) = links_in(text.body)
    not_yet = await caller.says("Has my deposit gone through yet?")
    await providers.stripe.pay(url)
    paid = await caller.says("Could you check if you got my payment now?")

    assert "a link to pay the deposit" in heard and "Deposit ($25)" in text.body
    link = providers.stripe.link(url)
    assert link["metadata"]["appointment_id"] == caller.engine.session.booked[-1].id
    assert "hasn't been paid yet" in not_yet and "$25" in not_yet
    assert "has been paid" in paid
    kept = await visit_links.link_of(db.pool, caller.engine.session.booked[-1].id, "payment")
    assert kept.paid_at is not None and kept.amount_cents == 2500
    assert [e.data["paid"] for e in caller.writer.events("payment_status")] == [False, True]


async def test_a_video_provider_down_is_said_and_its_link_follows_by_text(
        db, clinic, providers):
    await physio_is(db, clinic, video=True)
    caller = await priya_calls(db, clinic, providers)
    providers.daily.fail_next(503)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked")
    assert "couldn't get the video link just now; I'll text it to you" in heard
    (confirmation,) = providers.twilio.texts.to(PRIYA_PHONE)
    assert links_in(confirmation.body) == []
    (event,) = caller.writer.events("visit_link_failed")
    assert event.data["texted_later"] is True
    booking = caller.engine.session.booked[-1]
    (job,) = [j for j in await jobs.list_jobs(db.pool) if j.entrypoint == FINISH_JOB
              and j.payload["appointment_id"] == booking.id]

    runtime = SimpleNamespace(db=SimpleNamespace(pool=db.pool), reach=providers.reach)
    await finish_visit_links(runtime, job.payload)
    await finish_visit_links(runtime, job.payload)  # run again: nothing twice

    later = providers.twilio.texts.to(PRIYA_PHONE)[1:]
    assert len(later) == 1 and providers.daily.token_valid(links_in(later[0].body)[0])
    kinds = [t.kind for t in await text_messages.for_call(db.pool, caller.engine.session.call_id)]
    assert kinds == ["confirmation", "telehealth_link"]


async def test_a_payment_provider_that_refuses_the_key_is_said_and_nothing_is_promised(
        db, clinic, providers):
    await physio_is(db, clinic, deposit_cents=2500)
    caller = await priya_calls(db, clinic, providers)
    providers.stripe.fail_next(401, "invalid_request_error")

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked")
    assert "couldn't set up the link for the deposit; please call us" in heard
    assert "I'll text" not in heard
    (event,) = caller.writer.events("visit_link_failed")
    assert (event.data["retryable"], event.data["texted_later"]) == (False, False)
    assert [j for j in await jobs.list_jobs(db.pool) if j.entrypoint == FINISH_JOB
            and j.payload.get("call_id") == caller.engine.session.call_id] == []


async def test_nothing_booked_on_the_call_no_link_is_made(db, clinic, providers):
    await physio_is(db, clinic, video=True, deposit_cents=2500)
    caller = await priya_calls(db, clinic, providers)
    await caller.says("Hi, I'd like to book a physio appointment")

    refused = await caller.engine.tools.call("post_booking_closing", "GetTelehealthLink", {})

    assert refused.error_class == "guard"
    assert providers.daily.requests == [] and providers.stripe.requests == []


async def test_a_patient_calling_back_later_hears_whether_their_deposit_is_paid(
        db, clinic, providers):
    await physio_is(db, clinic, deposit_cents=2500)
    first = await priya_calls(db, clinic, providers)
    await books_the_first_morning_physio(first)
    (text,) = providers.twilio.texts.to(PRIYA_PHONE)
    await providers.stripe.pay(links_in(text.body)[0])

    later = await priya_calls(db, clinic, providers)
    heard = await later.says("Hi, I'm just calling to check my deposit went through")

    assert "$25 deposit has been paid" in heard
    assert [t.name for t in later.tool_calls()] == ["CheckPaymentStatus"]
