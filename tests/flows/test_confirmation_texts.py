"""A booking ends with its confirmation text, sent to the phone on the patient's record
from the clinic's number, and the caller hears it was texted only when Twilio took it.

No LLM: calls on the deterministic navigator over the embedded database, texting
through the twilio SDK against the simulator's stand-in for Twilio.
"""

from __future__ import annotations

import re

import pytest

from db import text_messages
from flows.reach import Reach
from flows.texting import Texter
from services.twilio.messages import TwilioMessages
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.flows.callers import DAVID_PHONE, PRIYA_PHONE, Caller, call_from
from tests.flows.test_engine import live_bookings, patient

CLINIC_NUMBER = "+15550100100"  # the demo clinic's number, the one the caller dialled
TEXTED = re.compile(r"\btext(ed)?\b.*\bending in 0 2 0 4\b", re.IGNORECASE)
ANY_TEXT = re.compile(r"\btext", re.IGNORECASE)


@pytest.fixture
async def twilio():
    fake = FakeTwilioRest()
    fake.add_number(CLINIC_NUMBER)
    async with serve_twilio_rest(fake):
        yield fake


def reach_of(db, fake: FakeTwilioRest, **account) -> Reach:
    return Reach(texter=Texter(db.pool, TwilioMessages(fake.account(**account))))


async def books_the_first_morning_physio(caller: Caller) -> str:
    await caller.says("Hi, I'd like to book a physio appointment")
    await caller.says("next week in the morning please")
    assert (await caller.says("the first one")).startswith("Just to confirm:")
    return await caller.says("yes please")


async def test_a_booking_is_texted_to_the_patients_own_number_and_the_caller_is_told(
        db, clinic, twilio):
    caller = await call_from(db, clinic, PRIYA_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked") and TEXTED.search(heard)
    (booking,) = await live_bookings(db, (await patient(db, clinic, PRIYA_PHONE)).id)
    (text,) = twilio.texts.to(PRIYA_PHONE)
    assert text.resource["from"] == CLINIC_NUMBER
    when = booking.local_start
    assert "Demo Family Clinic" in text.body and "physiotherapy" in text.body.lower()
    assert f"{when.day} {when:%b}" in text.body and "Reply STOP" in text.body
    (record,) = await text_messages.for_call(db.pool, caller.engine.session.call_id)
    assert (record.kind, record.to_number, record.status) == ("confirmation", PRIYA_PHONE,
                                                               "queued")
    assert record.sid == text.resource["sid"] and record.patient_id == caller.engine.session.patient.id
    assert [e.data["kind"] for e in caller.writer.events("text_sent")] == ["confirmation"]
    assert [t.name for t in caller.tool_calls()][-2:] == ["CreateAppointment", "SendTextMessage"]


async def test_a_patient_who_texted_stop_gets_no_text_and_hears_nothing_about_one(
        db, clinic, twilio):
    workspace_id, _ = clinic
    await text_messages.opt_out(db.pool, workspace_id, PRIYA_PHONE)
    caller = await call_from(db, clinic, PRIYA_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked") and not ANY_TEXT.search(heard)
    assert twilio.texts.to(PRIYA_PHONE) == []
    assert caller.tool_calls("SendTextMessage") == []


async def test_a_text_twilio_refuses_is_said_not_sent_and_the_booking_stands(
        db, clinic, twilio):
    caller = await call_from(db, clinic, DAVID_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)
    twilio.fail_next(400, 21614)  # a landline: it cannot receive texts

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked")
    assert re.search(r"couldn't send the text", heard) and not re.search(r"\btexted\b", heard)
    assert await live_bookings(db, (await patient(db, clinic, DAVID_PHONE)).id)
    (record,) = await text_messages.for_call(db.pool, caller.engine.session.call_id)
    assert (record.status, record.error_code) == ("refused", 21614)
    (event,) = caller.writer.events("text_not_sent")
    assert event.data["error_code"] == 21614
    (failed,) = caller.tool_calls("SendTextMessage")
    assert failed.error_class == "other"


async def test_a_recipient_twilio_knows_opted_out_is_never_offered_a_text_again(
        db, clinic, twilio):
    workspace_id, _ = clinic
    twilio.texts.opted_out.add(PRIYA_PHONE)  # texted STOP to the clinic's number at Twilio
    caller = await call_from(db, clinic, PRIYA_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)

    heard = await books_the_first_morning_physio(caller)

    assert re.search(r"asked us not to text", heard)
    assert not await text_messages.may_text(db.pool, workspace_id, PRIYA_PHONE)


async def test_twilio_silent_past_the_bound_is_neither_sent_nor_not_sent(db, clinic, twilio):
    caller = await call_from(db, clinic, PRIYA_PHONE, dialled_number=CLINIC_NUMBER,
                             reach=Reach(texter=Texter(
                                 db.pool, TwilioMessages(twilio.account()), timeout_s=0.3)))
    twilio.fail_next(500, 20500, stall_s=2.0)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked") and re.search(r"may or may not arrive", heard)
    assert [e.type for e in caller.writer.events("text_unconfirmed")] == ["text_unconfirmed"]


async def test_without_texting_set_up_a_booking_says_nothing_about_a_text(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE, dialled_number=CLINIC_NUMBER)

    heard = await books_the_first_morning_physio(caller)

    assert heard.startswith("You're booked") and not ANY_TEXT.search(heard)


async def test_a_text_goes_only_to_the_number_on_record_whatever_number_is_asked_for(
        db, clinic, twilio):
    caller = await call_from(db, clinic, PRIYA_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)
    await books_the_first_morning_physio(caller)
    tools = caller.engine.tools

    again = await tools.call("post_booking_closing", "SendTextMessage",
                             {"kind": "confirmation", "to": "+15550109876"})

    assert again.ok and TEXTED.search(again.text)
    assert twilio.texts.to("+15550109876") == []
    assert len(twilio.texts.to(PRIYA_PHONE)) == 2  # asked again: sent again, to the record's


async def test_the_same_text_asked_for_twice_in_a_row_is_sent_once(db, clinic, twilio):
    caller = await call_from(db, clinic, PRIYA_PHONE, reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)
    await books_the_first_morning_physio(caller)

    again = await caller.engine.tools.call("post_booking_closing", "SendTextMessage",
                                           {"kind": "confirmation"})

    assert again.ok and TEXTED.search(again.text)
    assert len(twilio.texts.to(PRIYA_PHONE)) == 1
    assert [e.data["tool"] for e in caller.writer.events("write_deduplicated")] == [
        "SendTextMessage"]


async def test_nobody_identified_no_text(db, clinic, twilio):
    caller = await call_from(db, clinic, "+15550109876", reach=reach_of(db, twilio),
                             dialled_number=CLINIC_NUMBER)

    refused = await caller.engine.tools.call("post_booking_closing", "SendTextMessage",
                                             {"kind": "confirmation"})

    assert refused.error_class == "guard"
    assert twilio.texts.to("+15550109876") == []
