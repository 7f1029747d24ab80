"""A warm hand-off through the Twilio stand-in: the person's phone rings, they hear the
summary and join the caller in the conference; nobody answering, a busy line or a person
who hangs up before joining each end the hand-off with that outcome and take the caller
back to the agent. Twilio's callbacks reach the hand-off as the service's webhooks pass
them on; every outcome is in the call's record and the hand-offs table."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiohttp import web

from call.call_session import CallLog
from db import handoffs
from db import repositories as repo
from runner.handoff import HandoffRequest, WarmHandoffs
from services.twilio.calls import TwilioCallError, TwilioCalls
from simulator.outbound_callee import CallTiming
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.api.clinics import new_number
from tests.fakes import CollectingWriter
from tests.local_http import serve_http

SUMMARY = ("Hello, this is the Harbour Clinic phone assistant with a caller for you. "
           "The caller is Dana Reyes, identified on this call.")
TIMING = CallTiming(no_answer_s=0.05, speech_scale=0.05)


class Service:
    """The service's hand-off webhooks, passing Twilio's callbacks to the hand-off."""

    def __init__(self) -> None:
        self.warm: WarmHandoffs | None = None
        self.log: CallLog | None = None
        self.app = web.Application()
        self.app.router.add_post("/voice/handoff/{id}/operator", self.operator)
        self.app.router.add_post("/voice/handoff/{id}/conference", self.conference)

    async def operator(self, request: web.Request) -> web.Response:
        form = await request.post()
        await self.warm.operator_status(request.match_info["id"], str(form["CallStatus"]),
                                        self.log)
        return web.Response(status=204)

    async def conference(self, request: web.Request) -> web.Response:
        form = await request.post()
        await self.warm.conference_event(request.match_info["id"],
                                         str(form["StatusCallbackEvent"]),
                                         form.get("CallSid"), self.log)
        return web.Response(status=204)


@pytest.fixture
async def line(db, workspace_id):
    """A caller on the line to the clinic (the call the agent is on), the stand-in, and
    the service's webhooks: (twilio, service, request, caller's leg, writer)."""
    clinic, caller, person = new_number(), new_number(), new_number()
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=caller, to_number=clinic, status="in_progress")
    twilio = FakeTwilioRest(timing=TIMING)
    twilio.add_number(clinic)
    sid = "CA" + uuid.uuid4().hex
    leg = twilio.add_inbound(sid, caller, clinic)
    service, writer = Service(), CollectingWriter()
    async with serve_http(service.app) as url, serve_twilio_rest(twilio):
        service.warm = WarmHandoffs(db.pool, TwilioCalls(twilio.account()), url)
        service.log = CallLog(call_id, writer)
        request = HandoffRequest(
            call_id=call_id, workspace_id=workspace_id, caller_call_sid=sid, number=person,
            from_number=clinic, destination="our Harbour clinic",
            reason="the caller asked to speak with a person", summary=SUMMARY)
        yield twilio, service, request, leg, writer
        await twilio.close()


async def outcome_of(db, call_id: str, wanted: str, timeout_s: float = 10.0):
    async def settled():
        while True:
            for handoff in await handoffs.for_call(db.pool, call_id):
                if handoff.outcome == wanted:
                    return handoff
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(settled(), timeout_s)


async def test_the_person_hears_the_summary_then_joins_the_caller(db, line):
    twilio, service, request, leg, writer = line
    twilio.add_callee(request.number, "operator")

    started = await service.warm.begin(request, service.log)
    answered = await outcome_of(db, request.call_id, "answered")
    await twilio.conference_over(started.conference, timeout_s=15)

    (placed,) = twilio.placed()
    assert (placed.form["To"], placed.form["From"]) == (request.number, request.from_number)
    operator = twilio.outcome(answered.operator_call_sid)
    assert operator.heard[0] == SUMMARY and operator.conferences == [started.conference]
    assert leg.conferences == [started.conference]  # the caller was moved into it
    assert answered.answered_at is not None and answered.destination == "our Harbour clinic"
    assert [e.data["outcome"] for e in writer.events("handoff_outcome")] == ["answered"]
    assert leg.reconnect is None  # answered: the caller stays with the person


@pytest.mark.parametrize(("who", "outcome"), [
    ("no_answer", "no_answer"), ("busy", "busy"), ("decline", "declined"),
])
async def test_a_person_not_reached_sends_the_caller_back_to_the_agent(db, line, who, outcome):
    twilio, service, request, leg, writer = line
    twilio.add_callee(request.number, who)

    await service.warm.begin(request, service.log)
    settled = await outcome_of(db, request.call_id, outcome)
    await asyncio.wait_for(leg.reconnected.wait(), 10)

    assert settled.answered_at is None and settled.ended_at is not None
    url, parameters = leg.reconnect
    assert url.endswith("/ws")
    assert parameters == {"call_id": request.call_id, "resume": f"handoff_{outcome}"}
    assert [e.data["outcome"] for e in writer.events("handoff_outcome")] == [outcome]


async def test_a_person_leg_twilio_refuses_leaves_the_caller_where_they_were(db, line):
    twilio, service, request, leg, writer = line
    twilio.fail_next(400, 21211)

    with pytest.raises(TwilioCallError):
        await service.warm.begin(request, service.log)

    assert not leg.redirected.is_set()
    assert writer.events("handoff_started") == []


class SlowCalls:
    """The account's Calls resource, with Twilio's callbacks overtaking a step of
    `begin`: the caller is moved into the conference, or the person's leg returned, only
    once `overtaken` is set."""

    def __init__(self, calls: TwilioCalls, *, hold: str) -> None:
        self._calls, self._hold = calls, hold
        self.overtaken = asyncio.Event()

    async def create(self, **kwargs):
        placed = await self._calls.create(**kwargs)
        if self._hold == "create":
            await asyncio.wait_for(self.overtaken.wait(), 10)
        return placed

    async def run_twiml(self, sid: str, twiml: str) -> None:
        if self._hold == "move" and "<Conference" in twiml:
            await asyncio.wait_for(self.overtaken.wait(), 10)
        await self._calls.run_twiml(sid, twiml)


async def test_a_busy_line_reported_before_the_caller_is_moved_still_takes_them_back(
        db, line):
    twilio, service, request, leg, writer = line
    twilio.add_callee(request.number, "busy")
    slow = SlowCalls(service.warm._calls, hold="move")
    service.warm._calls = slow

    begun = asyncio.create_task(service.warm.begin(request, service.log))
    await outcome_of(db, request.call_id, "busy")  # the person's line, first
    slow.overtaken.set()
    await begun
    await asyncio.wait_for(leg.reconnected.wait(), 10)

    url, parameters = leg.reconnect
    assert parameters == {"call_id": request.call_id, "resume": "handoff_busy"}
    assert len(leg.conferences) == 1  # moved in, then taken back: not left waiting
    assert [e.data["outcome"] for e in writer.events("handoff_outcome")] == ["busy"]


async def test_a_person_who_joins_before_their_leg_is_on_record_is_answered(db, line):
    twilio, service, request, leg, writer = line
    twilio.add_callee(request.number, "operator")
    slow = SlowCalls(service.warm._calls, hold="create")
    service.warm._calls = slow

    begun = asyncio.create_task(service.warm.begin(request, service.log))
    answered = await outcome_of(db, request.call_id, "answered")
    slow.overtaken.set()
    started = await begun

    assert answered.answered_at is not None and started.outcome == "answered"
    assert [e.data["outcome"] for e in writer.events("handoff_outcome")] == ["answered"]
    assert leg.reconnect is None
