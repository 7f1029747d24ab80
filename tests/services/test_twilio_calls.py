"""Placing, finding and hanging up outbound calls through the twilio SDK, against the
simulator's stand-in for Twilio's REST API: the requests are the ones Twilio documents,
and every refusal says whether trying again can help."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.twilio.calls import PlacedCall, TwilioCallError, TwilioCalls
from services.twilio.numbers import TwilioAccount
from simulator.outbound_callee import Callee, CallTiming, rfc2822
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.e2e.service_process import free_port

CLINIC = "+15550107001"
PATIENT = "+15550107100"
# Nothing listens here: the stand-in's webhooks are refused at once.
SERVICE = f"http://127.0.0.1:{free_port()}"
ANSWER = f"{SERVICE}/voice/outbound/answer"
STATUS = f"{SERVICE}/voice/outbound/status"



def clinic_account() -> FakeTwilioRest:
    fake = FakeTwilioRest(timing=CallTiming(no_answer_s=0.05))
    fake.add_number(CLINIC)
    fake.add_callee(PATIENT, Callee("busy"))
    return fake


async def place(calls: TwilioCalls, **changes) -> PlacedCall:
    return await calls.create(**{"to": PATIENT, "from_": CLINIC, "url": ANSWER,
                                 "status_callback": STATUS, **changes})


async def test_a_call_is_placed_with_every_progress_event_and_machine_detection():
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        placed = await place(TwilioCalls(fake.account()))
        await fake.wait_for(placed.sid)

    assert placed.sid.startswith("CA") and placed.status == "queued"
    assert (placed.to, placed.from_, placed.start_time) == (PATIENT, CLINIC, None)
    [request] = fake.placed()
    assert request.path == f"/2010-04-01/Accounts/{fake.account_sid}/Calls.json"
    assert request.form == {
        "To": PATIENT, "From": CLINIC, "Url": ANSWER, "Method": "POST",
        "StatusCallback": STATUS, "StatusCallbackMethod": "POST",
        "StatusCallbackEvent": "completed", "MachineDetection": "DetectMessageEnd",
    }
    events = [value for name, value in request.fields if name == "StatusCallbackEvent"]
    assert events == ["initiated", "ringing", "answered", "completed"]


async def test_a_call_without_machine_detection_does_not_ask_for_it():
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        placed = await place(TwilioCalls(fake.account()), machine_detection=False)
        await fake.wait_for(placed.sid)

    [request] = fake.placed()
    assert "MachineDetection" not in request.form


async def test_since_finds_the_calls_placed_to_a_number_from_a_moment_on():
    fake = clinic_account()
    fake.add_number("+15550107002")
    async with serve_twilio_rest(fake):
        calls = TwilioCalls(fake.account())
        earlier = await place(calls)
        await fake.wait_for(earlier.sid)
        fake.calls[earlier.sid].resource["start_time"] = rfc2822(
            datetime.now(UTC) - timedelta(hours=2))
        after = datetime.now(UTC) - timedelta(minutes=1)
        latest = await place(calls)
        other_line = await place(calls, from_="+15550107002")
        for sid in (latest.sid, other_line.sid):
            await fake.wait_for(sid)

        found = await calls.since(to=PATIENT, from_=CLINIC, after=after)

    assert [call.sid for call in found] == [latest.sid]
    assert found[0].status == "busy" and found[0].start_time is not None
    [listing] = [r for r in fake.requests if r.method == "GET"]
    assert (listing.query["To"], listing.query["From"]) == (PATIENT, CLINIC)
    assert listing.query["StartTime>"] == after.strftime("%Y-%m-%d")


async def test_since_reads_a_moment_in_any_timezone_as_the_same_instant():
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        calls = TwilioCalls(fake.account())
        placed = await place(calls)
        await fake.wait_for(placed.sid)
        an_hour_ahead = datetime.now(UTC).astimezone(
            datetime.now().astimezone().tzinfo) + timedelta(hours=1)

        assert await calls.since(to=PATIENT, from_=CLINIC, after=an_hour_ahead) == []


async def test_hanging_up_ends_the_call_and_an_ended_call_is_left_alone():
    fake = FakeTwilioRest(timing=CallTiming(no_answer_s=30))
    fake.add_number(CLINIC)  # nobody answers PATIENT: it rings until hung up
    async with serve_twilio_rest(fake):
        calls = TwilioCalls(fake.account())
        placed = await place(calls)

        await calls.hang_up(placed.sid)
        ended = await fake.wait_for(placed.sid)
        await calls.hang_up(placed.sid)

    [hang_up, again] = [r for r in fake.requests if r.path.endswith(f"{placed.sid}.json")]
    assert hang_up.method == "POST" and hang_up.form == {"Status": "completed"}
    assert again.form == {"Status": "completed"}
    assert ended["status"] == "canceled"


@pytest.mark.parametrize(("status", "code", "retryable"), [
    (429, 20429, True), (500, 20500, True), (503, 20503, True), (400, 21215, False),
    (403, 20403, False), (404, 20404, False),
])
async def test_a_refusal_says_whether_trying_again_can_help(status, code, retryable):
    fake = clinic_account()
    fake.fail_next(status, code)
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioCallError) as refused:
            await place(TwilioCalls(fake.account()))

    assert (refused.value.retryable, refused.value.code) == (retryable, code)
    assert fake.calls == {}


async def test_wrong_credentials_are_not_retried():
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioCallError) as refused:
            await place(TwilioCalls(fake.account(auth_token="not-the-token")))

    assert (refused.value.retryable, refused.value.code) == (False, 20003)
    assert fake.calls == {}


@pytest.mark.parametrize(("changes", "code"), [
    ({"to": "555-0107"}, 21211), ({"from_": "+15550107999"}, 21212),
])
async def test_a_bad_number_is_not_retried_and_is_not_quoted(changes, code):
    fake = clinic_account()
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioCallError) as refused:
            await place(TwilioCalls(fake.account()), **changes)

    assert (refused.value.retryable, refused.value.code) == (False, code)
    assert next(iter(changes.values())) not in str(refused.value)  # numbers stay out of logs
    assert fake.calls == {}


async def test_an_unreachable_twilio_is_worth_trying_again():
    closed = f"http://127.0.0.1:{free_port()}"
    calls = TwilioCalls(TwilioAccount("AC" + "0" * 32, "token", closed, timeout_s=2.0))
    with pytest.raises(TwilioCallError) as unreachable:
        await place(calls)

    assert unreachable.value.retryable and unreachable.value.code is None
    assert closed in str(unreachable.value)


async def test_a_twilio_that_does_not_answer_in_time_is_worth_trying_again():
    fake = clinic_account()
    fake.fail_next(500, stall_s=1.5)
    async with serve_twilio_rest(fake):
        with pytest.raises(TwilioCallError) as slow:
            await calls_with_timeout(fake, 0.3).since(to=PATIENT, from_=CLINIC,
                                                      after=datetime.now(UTC))

    assert slow.value.retryable and slow.value.code is None


def calls_with_timeout(fake: FakeTwilioRest, timeout_s: float) -> TwilioCalls:
    return TwilioCalls(fake.account(timeout_s=timeout_s))
