"""Pointing a Twilio number at this service through the twilio SDK, against a local
stand-in for Twilio's REST API."""

from __future__ import annotations

import asyncio

import pytest

from services.twilio.numbers import TwilioAccount, TwilioNumberError, connect_number
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.e2e.service_process import free_port

NUMBER = "+15550107001"
VOICE = "https://agent.example.com/voice/answer"
STATUS = "https://agent.example.com/voice/status"



async def connect(account: TwilioAccount, number: str = NUMBER):
    return await asyncio.to_thread(connect_number, account, number, voice_url=VOICE,
                                   status_url=STATUS)


async def test_the_numbers_webhooks_are_set_to_post_to_this_service():
    fake = FakeTwilioRest()
    sid = fake.add_number(NUMBER)
    async with serve_twilio_rest(fake):
        connected = await connect(fake.account())

    assert (connected.sid, connected.phone_number) == (sid, NUMBER)
    assert (connected.voice_url, connected.voice_method) == (VOICE, "POST")
    assert (connected.status_callback, connected.status_callback_method) == (STATUS, "POST")
    [update] = fake.updates()
    assert update.path == f"/2010-04-01/Accounts/{fake.account_sid}/IncomingPhoneNumbers/{sid}.json"
    assert update.form == {"VoiceUrl": VOICE, "VoiceMethod": "POST",
                           "StatusCallback": STATUS, "StatusCallbackMethod": "POST"}
    [lookup] = [r for r in fake.requests if r.method == "GET"]
    assert lookup.query["PhoneNumber"] == NUMBER


async def test_wrong_credentials_are_named_and_nothing_is_changed():
    fake = FakeTwilioRest()
    fake.add_number(NUMBER)
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioNumberError) as refused:
            await connect(fake.account(auth_token="not-the-token"))

    assert refused.value.kind == "credentials"
    assert "TWILIO_ACCOUNT_SID" in str(refused.value) and "TWILIO_AUTH_TOKEN" in str(refused.value)
    assert fake.updates() == []


async def test_a_number_the_account_does_not_have_is_said_so():
    fake = FakeTwilioRest()
    fake.add_number("+15550107999")
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioNumberError) as missing:
            await connect(fake.account())

    assert missing.value.kind == "not_found" and NUMBER in str(missing.value)
    assert fake.updates() == []


async def test_an_unreachable_twilio_is_said_so():
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TwilioNumberError) as unreachable:
        await connect(TwilioAccount("AC" + "0" * 32, "token", closed, timeout_s=2.0))

    assert unreachable.value.kind == "unreachable" and closed in str(unreachable.value)
