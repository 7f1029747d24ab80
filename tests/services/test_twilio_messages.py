"""Texting through the twilio SDK against the simulator's stand-in for Twilio's Messages
resource: the request is the one Twilio documents, each status change reaches the
status callback signed as Twilio signs it, and every refusal says whether trying again
can help, a recipient who texted STOP above all."""

from __future__ import annotations

import pytest
from aiohttp import web
from twilio.request_validator import RequestValidator

from services.twilio.messages import Sender, TwilioMessageError, TwilioMessages
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.local_http import serve_http

CLINIC = "+15550107001"
PATIENT = "+15550107100"
CONFIRMATION = "Demo Clinic: you're booked for a physiotherapy session on Friday at 9 AM."



def clinic_account() -> FakeTwilioRest:
    fake = FakeTwilioRest()
    fake.add_number(CLINIC)
    return fake


class StatusReceiver:
    """The service's status callback: what Twilio posted, and whether it was signed."""

    def __init__(self, auth_token: str) -> None:
        self.validator = RequestValidator(auth_token)
        self.posted: list[tuple[dict[str, str], bool]] = []

    async def handle(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        signed = self.validator.validate(str(request.url), form,
                                         request.headers.get("X-Twilio-Signature", ""))
        self.posted.append((form, signed))
        return web.Response(status=204)


async def test_a_text_is_sent_from_the_clinics_number_and_reported_until_delivered():
    fake = clinic_account()
    receiver = StatusReceiver(fake.auth_token)
    app = web.Application()
    app.router.add_post("/sms/status", receiver.handle)
    async with serve_http(app) as service, serve_twilio_rest(fake):
        sent = await TwilioMessages(fake.account()).send(
            to=PATIENT, sender=Sender(number=CLINIC), body=CONFIRMATION,
            status_callback=f"{service}/sms/status")
        await fake.texts.wait_settled()
        now = await TwilioMessages(fake.account()).get(sent.sid)

    assert sent.sid.startswith("SM") and (sent.status, sent.to) == ("queued", PATIENT)
    (request,) = [r for r in fake.requests if r.method == "POST"]
    assert request.path == f"/2010-04-01/Accounts/{fake.account_sid}/Messages.json"
    assert request.form == {"To": PATIENT, "From": CLINIC, "Body": CONFIRMATION,
                            "StatusCallback": f"{service}/sms/status"}
    assert [text.body for text in fake.texts.to(PATIENT)] == [CONFIRMATION]
    assert [(form["MessageStatus"], signed) for form, signed in receiver.posted] == [
        ("sent", True), ("delivered", True)]
    assert receiver.posted[-1][0]["MessageSid"] == sent.sid
    assert now.status == "delivered" and now.error_code is None


async def test_through_a_messaging_service_twilio_picks_the_sender():
    fake = clinic_account()
    service = fake.texts.add_messaging_service()
    async with serve_twilio_rest(fake):
        sent = await TwilioMessages(fake.account()).send(
            to=PATIENT, sender=Sender(messaging_service_sid=service), body=CONFIRMATION)
        await fake.texts.wait_settled()

    assert sent.status == "accepted"
    (request,) = [r for r in fake.requests if r.method == "POST"]
    assert request.form == {"To": PATIENT, "MessagingServiceSid": service,
                            "Body": CONFIRMATION}


async def test_a_recipient_who_texted_stop_is_refused_for_good_and_gets_nothing():
    fake = clinic_account()
    fake.texts.opted_out.add(PATIENT)
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioMessageError) as refused:
            await TwilioMessages(fake.account()).send(
                to=PATIENT, sender=Sender(number=CLINIC), body=CONFIRMATION)

    error = refused.value
    assert error.opted_out and not error.retryable and error.code == 21610
    assert "opted out" in str(error) and PATIENT not in str(error)
    assert fake.texts.to(PATIENT) == []


@pytest.mark.parametrize(("changes", "code"), [
    ({"to": "555-0100"}, 21211),  # not a phone number
    ({"sender": Sender(number="+15550109999")}, 21606),  # not the account's number
    ({"body": "x" * 1601}, 21617),
])
async def test_a_text_twilio_cannot_send_is_refused_for_good_with_what_is_wrong(changes, code):
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioMessageError) as refused:
            await TwilioMessages(fake.account()).send(**{
                "to": PATIENT, "sender": Sender(number=CLINIC), "body": CONFIRMATION,
                **changes})

    assert refused.value.code == code and not refused.value.retryable
    assert "x" * 20 not in str(refused.value) and CONFIRMATION not in str(refused.value)


async def test_wrong_credentials_are_named_and_a_twilio_outage_may_be_tried_again():
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioMessageError) as bad_key:
            await TwilioMessages(fake.account(auth_token="wrong")).send(
                to=PATIENT, sender=Sender(number=CLINIC), body=CONFIRMATION)
        fake.fail_next(503, 20500)
        with pytest.raises(TwilioMessageError) as outage:
            await TwilioMessages(fake.account()).send(
                to=PATIENT, sender=Sender(number=CLINIC), body=CONFIRMATION)

    assert not bad_key.value.retryable and "auth token is wrong" in str(bad_key.value)
    assert outage.value.retryable and outage.value.status == 503


async def test_a_number_that_cannot_take_texts_ends_undelivered_with_the_carriers_code():
    fake = clinic_account()
    fake.texts.undeliverable.add(PATIENT)
    async with serve_twilio_rest(fake):
        sent = await TwilioMessages(fake.account()).send(
            to=PATIENT, sender=Sender(number=CLINIC), body=CONFIRMATION)
        await fake.texts.wait_settled()
        now = await TwilioMessages(fake.account()).get(sent.sid)

    assert (now.status, now.error_code) == ("undelivered", 30003)


def test_a_text_needs_a_sender():
    with pytest.raises(ValueError, match="From number or a Messaging Service"):
        Sender()
