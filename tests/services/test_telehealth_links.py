"""Video-visit links against the simulator's stand-in for Daily's REST API, and from a
clinic's own link template: the patient's link opens that visit's own private room for
its window and no longer, asking twice is safe, and every failure says whether asking
again can help without ever showing the key or a patient's token."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from loguru import logger

from services.telehealth.daily import DailyRooms
from services.telehealth.links import (
    LinkTemplate,
    TelehealthError,
    VideoVisits,
    VisitWindow,
    room_name,
)
from simulator.daily_api import FakeDaily, serve_daily

APPOINTMENT = "6f1c2a8e-4b7d-4e1a-9c3f-2d5e8a7b1c90"
OTHER_APPOINTMENT = "0b9e7d6c-5a4f-4e3d-8c2b-1a0f9e8d7c6b"


def tomorrow_at_ten(appointment_id: str = APPOINTMENT) -> VisitWindow:
    starts = (datetime.now(UTC) + timedelta(days=1)).replace(
        hour=10, minute=0, second=0, microsecond=0)
    return VisitWindow(appointment_id, starts, starts + timedelta(minutes=30))


def daily(fake: FakeDaily, *, api_key: str | None = None, **changes: Any) -> DailyRooms:
    """The adapter pointed at the stand-in, with its key unless told otherwise."""
    return DailyRooms(api_key or fake.api_key, base_url=fake.base_url, **changes)


@pytest.fixture
def logged() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lines.append, level="DEBUG", format="{message}")
    yield lines
    logger.remove(sink)


async def refused(rooms: DailyRooms, visit: VisitWindow) -> TelehealthError:
    with pytest.raises(TelehealthError) as caught:
        await rooms.link_for(visit)
    return caught.value


# --- Daily: the link ---------------------------------------------------------------


async def test_the_link_opens_the_visits_own_private_room_with_a_token():
    fake = FakeDaily(domain="westside-physio")
    async with serve_daily(fake):
        link = await daily(fake).link_for(tomorrow_at_ten())
        other = await daily(fake).link_for(tomorrow_at_ten(OTHER_APPOINTMENT))

    name = room_name(APPOINTMENT)
    assert (link.provider, link.room) == ("daily", name)
    assert link.url.startswith(f"https://westside-physio.daily.co/{name}?t=")
    assert fake.rooms[name]["privacy"] == "private"
    assert fake.token_valid(link.url) and fake.token_valid(other.url)
    assert other.room != link.room
    stolen = other.url.replace(other.room or "", name)  # another patient's token
    assert not fake.token_valid(stolen)
    room_request, token_request = [(r.method, r.path, r.json) for r in fake.requests][:2]
    assert room_request[:2] == ("POST", "/v1/rooms")
    assert token_request == ("POST", "/v1/meeting-tokens", {"properties": {
        "room_name": name, "exp": fake.rooms[name]["config"]["exp"], "is_owner": False}})
    assert all("authorization" not in {k.lower() for k in r.headers} for r in fake.requests)


async def test_the_room_is_open_from_15_minutes_before_until_30_after():
    visit = tomorrow_at_ten()
    fake = FakeDaily()
    async with serve_daily(fake):
        link = await daily(fake).link_for(visit)

    opens = visit.starts_at - timedelta(minutes=15)
    closes = visit.ends_at + timedelta(minutes=30)
    (created,) = fake.room_requests()
    assert created.json == {"name": room_name(APPOINTMENT), "privacy": "private", "properties": {
        "nbf": int(opens.timestamp()), "exp": int(closes.timestamp()),
        "eject_at_room_exp": True, "enable_prejoin_ui": True}}
    assert link.expires_at == closes
    (grant,) = fake.tokens.values()
    assert grant.properties["exp"] == int(closes.timestamp())


async def test_the_clinic_can_choose_how_early_patients_join_and_how_long_they_stay():
    visit = tomorrow_at_ten()
    fake = FakeDaily()
    async with serve_daily(fake):
        link = await daily(fake, early_join_min=5, grace_min=0).link_for(visit)

    config = fake.rooms[room_name(APPOINTMENT)]["config"]
    assert config["nbf"] == int((visit.starts_at - timedelta(minutes=5)).timestamp())
    assert config["exp"] == int(visit.ends_at.timestamp()) and link.expires_at == visit.ends_at


async def test_asking_twice_for_the_same_visit_gives_the_same_room():
    fake = FakeDaily()
    async with serve_daily(fake), httpx.AsyncClient() as shared:
        rooms = daily(fake, client=shared)
        first = await rooms.link_for(tomorrow_at_ten())
        second = await rooms.link_for(tomorrow_at_ten())
        assert not shared.is_closed  # a shared client stays the caller's to close

    assert first.room == second.room and list(fake.rooms) == [first.room]
    assert first.url.split("?")[0] == second.url.split("?")[0]
    assert fake.token_valid(first.url) and fake.token_valid(second.url)
    assert [(r.method, r.path) for r in fake.requests[2:]] == [
        ("POST", "/v1/rooms"), ("GET", f"/v1/rooms/{first.room}"),
        ("POST", "/v1/meeting-tokens")]


async def test_a_public_room_already_holding_the_visits_name_is_not_used():
    fake = FakeDaily()
    async with serve_daily(fake):
        async with httpx.AsyncClient() as http:
            await http.post(f"{fake.base_url}/rooms", json={"name": room_name(APPOINTMENT)},
                            headers={"Authorization": f"Bearer {fake.api_key}"})
        error = await refused(daily(fake), tomorrow_at_ten())

    assert not error.retryable and "not the private room" in error.reason
    assert fake.tokens == {}


async def test_a_visit_that_is_over_gets_no_room():
    starts = datetime.now(UTC) - timedelta(hours=3)
    fake = FakeDaily()
    async with serve_daily(fake):
        error = await refused(daily(fake), VisitWindow(APPOINTMENT, starts,
                                                       starts + timedelta(minutes=30)))

    assert not error.retryable and "over" in error.reason and fake.requests == []


# --- Daily: failures ---------------------------------------------------------------


async def test_a_wrong_key_is_refused_for_good():
    fake = FakeDaily()
    async with serve_daily(fake):
        error = await refused(daily(fake, api_key="sk_wrong_key_0123456789"), tomorrow_at_ten())

    assert (error.retryable, error.status) == (False, 401)
    assert "API key" in error.reason and "sk_wrong_key" not in str(error)
    assert fake.rooms == {}


async def test_a_request_daily_refuses_is_refused_for_good_with_its_type():
    fake = FakeDaily()
    fake.fail_next(400, {"error": "invalid-request-error", "info": "exp is in the past"})
    async with serve_daily(fake):
        error = await refused(daily(fake), tomorrow_at_ten())

    assert (error.retryable, error.status) == (False, 400)
    assert "invalid-request-error" in error.reason


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_a_rate_limit_or_an_outage_may_be_tried_again(status):
    fake = FakeDaily()
    fake.fail_next(status)
    async with serve_daily(fake):
        error = await refused(daily(fake), tomorrow_at_ten())
        again = await daily(fake).link_for(tomorrow_at_ten())

    assert (error.retryable, error.status) == (True, status)
    assert fake.token_valid(again.url)


async def test_daily_not_answering_in_time_may_be_tried_again():
    fake = FakeDaily()
    fake.stall_next(5.0)
    async with serve_daily(fake):
        error = await refused(daily(fake, timeout_s=0.2), tomorrow_at_ten())

    assert (error.retryable, error.status) == (True, None)
    assert "did not answer in 0.2 s" in error.reason


async def test_daily_out_of_reach_may_be_tried_again():
    fake = FakeDaily()
    async with serve_daily(fake) as gone:
        pass
    error = await refused(DailyRooms(fake.api_key, base_url=gone), tomorrow_at_ten())

    assert error.retryable and "cannot reach Daily" in error.reason


@pytest.mark.parametrize("junk", [
    "<html><body>502 Bad Gateway</body></html>",
    '{"id": "5e3cf703", "name": "visit-',
    {"id": "5e3cf703", "name": "visit-1"},  # JSON, but no url
    ["not", "a", "room"],
])
async def test_an_answer_that_is_not_dailys_json_may_be_tried_again(junk):
    fake = FakeDaily()
    fake.fail_next(200, junk)
    async with serve_daily(fake):
        error = await refused(daily(fake), tomorrow_at_ten())

    assert error.retryable and error.reason == "Daily answered with something unreadable"


async def test_the_token_and_the_key_never_appear_in_an_error_or_a_log(logged):
    fake = FakeDaily()
    async with serve_daily(fake):
        link = await daily(fake).link_for(tomorrow_at_ten())
        token = link.url.split("?t=")[1]
        errors = []
        for status, body in [(400, {"error": "invalid-request-error",
                                    "info": f"token {token} for key {fake.api_key}"}),
                             (401, {"error": "authentication-error", "info": fake.api_key}),
                             (500, f"oops {token} {fake.api_key}"),
                             (200, f"<p>{token} {fake.api_key}</p>")]:
            fake.fail_next(status, body)
            errors.append(await refused(daily(fake), tomorrow_at_ten()))

    assert [e.status for e in errors] == [400, 401, 500, 200]
    shown = [str(e) for e in errors] + [e.reason for e in errors] + logged
    assert logged and not [line for line in shown if token in line or fake.api_key in line]


# --- Daily: a cancelled visit ------------------------------------------------------


async def test_a_cancelled_visits_room_is_deleted_and_its_link_no_longer_opens():
    fake = FakeDaily()
    async with serve_daily(fake):
        rooms = daily(fake)
        link = await rooms.link_for(tomorrow_at_ten())
        await rooms.delete_room(link.room or "")
        await rooms.delete_room(link.room or "")  # gone already: done

    assert fake.rooms == {} and not fake.token_valid(link.url)
    assert [(r.method, r.path) for r in fake.requests[2:]] == [
        ("DELETE", f"/v1/rooms/{link.room}")] * 2


async def test_a_room_daily_cannot_delete_now_may_be_tried_again():
    fake = FakeDaily()
    fake.fail_next(503)
    async with serve_daily(fake):
        with pytest.raises(TelehealthError) as caught:
            await daily(fake).delete_room(room_name(APPOINTMENT))

    assert (caught.value.retryable, caught.value.status) == (True, 503)


# --- A clinic's own link template --------------------------------------------------


async def test_a_template_link_fills_in_the_visit():
    chicago = ZoneInfo("America/Chicago")
    starts = datetime(2031, 3, 14, 21, 30, tzinfo=chicago)  # 03:30 the next day in UTC
    visit = VisitWindow("appt 42/b", starts, starts + timedelta(minutes=45))
    template = LinkTemplate("https://meet.example-clinic.org/{date}/{room}?ref={appointment_id}")

    link = await template.link_for(visit)

    assert link.url == (f"https://meet.example-clinic.org/2031-03-14/{room_name('appt 42/b')}"
                        "?ref=appt%2042%2Fb")
    assert (link.provider, link.room, link.expires_at) == ("template", room_name("appt 42/b"),
                                                           None)


async def test_a_template_without_a_room_names_none():
    link = await LinkTemplate("https://meet.example-clinic.org/visit/{appointment_id}").link_for(
        tomorrow_at_ten())

    assert link.url == f"https://meet.example-clinic.org/visit/{APPOINTMENT}"
    assert link.room is None


def test_room_names_are_stable_short_and_fit_daily():
    assert room_name(APPOINTMENT) == room_name(APPOINTMENT) != room_name(OTHER_APPOINTMENT)
    assert len(room_name(APPOINTMENT)) == len("visit-") + 12
    assert APPOINTMENT[:8] not in room_name(APPOINTMENT)


@pytest.mark.parametrize(("template", "why"), [
    ("https://meet.example-clinic.org/visit/{patient_name}", "unknown placeholder"),
    ("https://meet.example-clinic.org/visit/{}", "unknown placeholder"),
    ("https://meet.example-clinic.org/visit/{date:%d}", "format"),
    ("https://meet.example-clinic.org/visit/{room", "unbalanced"),
    ("http://meet.example-clinic.org/visit/{appointment_id}", "https"),
    ("meet.example-clinic.org/visit/{appointment_id}", "https"),
    ("https://{room}.example-clinic.org/", "host"),
])
def test_a_bad_template_is_refused_when_it_is_loaded(template, why):
    with pytest.raises(ValueError, match=why):
        LinkTemplate(template)


# --- Both providers ----------------------------------------------------------------


async def test_either_provider_answers_a_visit_with_a_link_of_its_own_name():
    fake = FakeDaily()
    async with serve_daily(fake):
        providers: list[VideoVisits] = [
            LinkTemplate("https://meet.example-clinic.org/{room}"), daily(fake)]
        links = [await provider.link_for(tomorrow_at_ten()) for provider in providers]

    assert [link.provider for link in links] == [p.name for p in providers]
    assert {link.room for link in links} == {room_name(APPOINTMENT)}


@pytest.mark.parametrize(("starts", "ends", "why"), [
    (datetime(2031, 3, 14, 10), datetime(2031, 3, 14, 11), "time zone"),
    (datetime(2031, 3, 14, 10, tzinfo=UTC), datetime(2031, 3, 14, 10, tzinfo=UTC), "end after"),
])
def test_a_visit_needs_aware_times_that_end_after_they_start(starts, ends, why):
    with pytest.raises(ValueError, match=why):
        VisitWindow(APPOINTMENT, starts, ends)
