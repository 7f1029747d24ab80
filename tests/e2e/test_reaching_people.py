"""Reaching people beyond the call, end to end: the real service, pointed at the Twilio
stand-in, with a simulated caller.

- A booking made on the phone ends with its confirmation text: the stand-in records it
  sent from the clinic's number to the caller's, the caller heard it was texted, and
  the text's status callbacks (signed, to `/sms/status`) bring it to `delivered` in the
  clinic's record.
"""

from __future__ import annotations

import uuid
from datetime import time as clock

import pytest

from db import repositories as repo
from db import text_messages
from simulator.simulator import CallScript, simulate_call
from simulator.twilio_rest import FakeTwilioRest
from tests.api.clinics import new_number
from tests.e2e.follow_through import (
    add_clinic,
    database_of_its_own,
    eventually,
    service_and_twilio,
)
from tests.e2e.outbound_tasks import afternoon_zone

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
