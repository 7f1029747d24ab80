"""Cliniko as the practice system, against a local fake of its API: open times come back
as the world model's practitioners, locations and type; verified events reach Cliniko
as the documented requests, once; every upstream failure is a PMSError."""

from __future__ import annotations

import asyncio
import base64
import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from pydantic import ValidationError

from config import Settings
from db import repositories as repo
from db import scheduling, world
from db.seed import seed_clinic
from db.world import EventDraft, Provenance
from services.cliniko.practice import ClinikoRateLimited, base_url_for
from services.practice import BuiltinPractice, ClinikoPractice, build_practice
from services.practice.base import BookingMade, PMSError, SlotConflict
from tests.fake_cliniko import FakeCliniko, serve_cliniko

pytestmark = pytest.mark.timeout(30)

ZONE = ZoneInfo("America/Chicago")
TODAY = date(2026, 11, 23)  # a Monday
NOW = datetime.combine(TODAY, time(10), ZONE)
KEY = "MS0xTGl2ZUNsaW5pa29LZXk-au1"
AGENT = "clinic-voice-agent tests (ops@example.invalid)"
VERIFIED = Provenance("tool", "tool:test", "verified")
HOURS = (time(9), time(14), time(17, 30))  # morning, afternoon, evening


@pytest.fixture
async def clinic(db, workspace_id):
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    assert await seed_clinic(db.pool, workspace_id, service["id"], TODAY)
    sid = uuid.UUID(service["id"])
    people = {r["name"]: str(r["id"]) for r in await db.pool.fetch(
        "SELECT id, name FROM practitioners WHERE service_id = $1", sid)}
    places = {r["name"]: str(r["id"]) for r in await db.pool.fetch(
        "SELECT id, name FROM locations WHERE service_id = $1", sid)}
    kinds = {t.name: t for t in await scheduling.appointment_types(db.pool, service["id"])}
    return {"workspace": workspace_id, "service": service["id"], "people": people,
            "places": places, "kinds": kinds}


def cliniko_clinic() -> tuple[FakeCliniko, dict[str, str]]:
    """Cliniko's side of the demo clinic: three of its doctors (titles and punctuation as
    Cliniko keeps them), one practitioner and one business the world model lacks."""
    fake = FakeCliniko(api_key=KEY, today=TODAY)
    ids = {"Downtown": fake.add_business("Downtown"),
           "Northside": fake.add_business("NORTHSIDE"),
           "Lakeside": fake.add_business("Lakeside")}
    ids["Patel"] = fake.add_practitioner("Maya", "Patel", title="Dr",
                                         businesses=[ids["Downtown"]])
    ids["Okafor"] = fake.add_practitioner("James", "Okafor", title="Dr.",
                                          businesses=[ids["Downtown"]])
    ids["Reyes"] = fake.add_practitioner("Sofia", "Reyes",
                                         businesses=[ids["Northside"], ids["Lakeside"]])
    ids["Nobody"] = fake.add_practitioner("Pat", "Nobody", businesses=[ids["Downtown"]])
    doctors = [ids[n] for n in ("Patel", "Okafor", "Reyes", "Nobody")]
    ids["follow-up"] = fake.add_appointment_type("Follow-up Visit", 20, practitioners=doctors)
    ids["physical"] = fake.add_appointment_type("Annual physical", 30,
                                                practitioners=[ids["Patel"]])
    days = [TODAY + timedelta(days=n) for n in range(-3, 21)]
    for business, person in (("Downtown", "Patel"), ("Downtown", "Okafor"),
                             ("Northside", "Reyes"), ("Lakeside", "Reyes"),
                             ("Downtown", "Nobody")):
        fake.open_times(ids[business], ids[person], ids["follow-up"],
                        [datetime.combine(d, h, ZONE) for d in days for h in HOURS])
    return fake, ids


@pytest.fixture
async def cliniko(db):
    fake, ids = cliniko_clinic()
    async with serve_cliniko(fake) as base_url:
        practice = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT, base_url=base_url)
        try:
            yield fake, ids, practice
        finally:
            await practice.aclose()


async def fortnight(practice, clinic, **kwargs):
    values = {"first_day": TODAY, "last_day": TODAY + timedelta(days=13), "now": NOW, **kwargs}
    return await practice.available_slots(
        clinic["service"], appointment_type=clinic["kinds"]["Follow-up visit"], **values)


async def pushed_event(db, clinic, kind: str, payload: dict, patient_id: str,
                       table: str | None = None, entity: str | None = None):
    event_id = await world.write_event(db.pool, clinic["workspace"], EventDraft(
        kind, f"{kind} (test)", payload, patient_id, table, entity), VERIFIED)
    await world.judge_event(db.pool, event_id, verification="approved", confidence="verified",
                            note={"stage": "test"})
    return (await world.events_by_ids(db.pool, [event_id]))[0]


async def new_patient(db, clinic, **fields):
    values = {"first_name": "Nora", "last_name": "Quinn", "date_of_birth": date(1980, 5, 17),
              "phone": "+15550100299", "email": "nora.quinn@example.com", "address": None,
              **fields}
    record, created, event_id = await world.create_patient(
        db.pool, clinic["workspace"], provenance=VERIFIED, **values)
    assert created
    return record, (await world.events_by_ids(db.pool, [event_id]))[0]


async def external_id(db, table: str, entity_id: str) -> str | None:
    return await db.pool.fetchval(
        "SELECT external_id FROM external_refs WHERE system = 'cliniko' AND entity_table = $1 "
        "AND entity_id = $2", table, uuid.UUID(entity_id))


# --- Open times -------------------------------------------------------------------------


async def test_slots_are_the_world_models_and_keep_to_the_range_part_of_day_and_now(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    first, last = TODAY - timedelta(days=2), TODAY + timedelta(days=9)
    slots = await fortnight(practice, clinic, first_day=first, last_day=last,
                            part_of_day="afternoon")

    people, places = clinic["people"], clinic["places"]
    expected_people = {people["Dr. Maya Patel"], people["Dr. James Okafor"],
                       people["Dr. Sofia Reyes"]}
    assert {s.practitioner_id for s in slots} == expected_people
    assert {(s.practitioner_id, s.location_id) for s in slots} == {
        (people["Dr. Maya Patel"], places["Downtown"]),
        (people["Dr. James Okafor"], places["Downtown"]),
        (people["Dr. Sofia Reyes"], places["Northside"])}
    assert {s.appointment_type_id for s in slots} == {clinic["kinds"]["Follow-up visit"].id}
    assert len(slots) == 3 * 10  # three doctors, 14:00 on each day from today to last
    for slot in slots:
        assert slot.starts_at.tzinfo == ZONE and slot.starts_at.time() == time(14)
        assert TODAY <= slot.starts_at.date() <= last and slot.starts_at >= NOW
        assert slot.ends_at - slot.starts_at == timedelta(minutes=20)
    assert slots == sorted(slots, key=lambda s: (s.starts_at, s.practitioner_name))
    assert {s.practitioner_name for s in slots} == {"Dr. Maya Patel", "Dr. James Okafor",
                                                    "Dr. Sofia Reyes"}

    asked = fake.received("GET")
    times = [r for r in asked if r.path.endswith("/available_times")]
    for request in times:  # never a past day, never more than 7 days per request
        start, end = (date.fromisoformat(request.params(p)[0]) for p in ("from", "to"))
        assert TODAY <= start <= end <= last and (end - start).days <= 6
        assert request.headers["User-Agent"] == AGENT
        assert request.headers["Accept"] == "application/json"
        assert request.headers["Authorization"] == "Basic " + base64.b64encode(
            f"{KEY}:".encode()).decode()
    assert not [r for r in times if ids["Nobody"] in r.path or ids["Lakeside"] in r.path]


async def test_slots_start_after_now_and_follow_the_part_of_day(db, clinic, cliniko):
    _, _, practice = cliniko
    today = await fortnight(practice, clinic, last_day=TODAY)
    assert {s.starts_at.time() for s in today} == {time(14), time(17, 30)}  # 9:00 is past

    mornings = await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1),
                               last_day=TODAY + timedelta(days=1), part_of_day="morning")
    evenings = await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1),
                               last_day=TODAY + timedelta(days=1), part_of_day="evening")
    assert [s.starts_at.time() for s in mornings] == [time(9)] * 3
    assert [s.starts_at.time() for s in evenings] == [time(17, 30)] * 3


async def test_a_type_cliniko_lacks_has_no_slots(db, clinic, cliniko):
    _, _, practice = cliniko
    flu = clinic["kinds"]["Flu shot"]
    assert await practice.available_slots(clinic["service"], appointment_type=flu,
                                          first_day=TODAY, last_day=TODAY, now=NOW) == []


async def test_lists_are_read_page_by_page(db, clinic, cliniko):
    fake, _, practice = cliniko
    fake.max_per_page = 2
    slots = await fortnight(practice, clinic, last_day=TODAY + timedelta(days=1))

    assert len(slots) == 3 * 2 + 3 * 3  # today 14:00 and 17:30; tomorrow all three
    pages = {(r.path, r.params("page")[0]) for r in fake.received("GET") if r.params("page")}
    assert ("/v1/businesses", "2") in pages and ("/v1/practitioners", "2") in pages


# --- Writes -----------------------------------------------------------------------------


async def test_a_verified_patient_booking_and_cancellation_reach_cliniko_once(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    record, created_event = await new_patient(db, clinic)

    outcome = await practice.push(created_event)
    [post] = fake.received("POST", "/v1/patients")
    assert post.body == {"first_name": "Nora", "last_name": "Quinn",
                         "date_of_birth": "1980-05-17", "email": "nora.quinn@example.com",
                         "patient_phone_numbers": [{"phone_type": "Mobile",
                                                    "number": "+15550100299"}]}
    assert post.headers["Content-Type"] == "application/json"
    assert outcome.status == "pushed" and outcome.external_id in fake.patients
    assert await external_id(db, "patients", record.id) == outcome.external_id
    again = await practice.push(created_event)
    assert (again.status, again.external_id) == ("already_there", outcome.external_id)
    assert len(fake.received("POST", "/v1/patients")) == 1

    slot = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1)))[0]
    appointment = await scheduling.book(db.pool, slot, patient_id=record.id, call_id=None)
    booked = await pushed_event(db, clinic, "appointment_booked",
                                {"appointment_id": appointment.id}, record.id,
                                "appointments", appointment.id)
    outcome_booked = await practice.push(booked)
    [create] = fake.received("POST", "/v1/individual_appointments")
    who = {clinic["people"]["Dr. Maya Patel"]: "Patel",
           clinic["people"]["Dr. James Okafor"]: "Okafor"}[slot.practitioner_id]
    assert create.body == {
        "starts_at": slot.starts_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "patient_id": outcome.external_id, "practitioner_id": ids[who],
        "appointment_type_id": ids["follow-up"], "business_id": ids["Downtown"]}
    assert outcome_booked.status == "pushed"
    assert await external_id(db, "appointments", appointment.id) == outcome_booked.external_id
    assert slot not in await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1))
    assert (await practice.push(booked)).status == "already_there"
    assert len(fake.received("POST", "/v1/individual_appointments")) == 1

    await scheduling.cancel(db.pool, appointment.id, patient_id=record.id, call_id=None)
    cancelled = await pushed_event(db, clinic, "appointment_cancelled",
                                   {"appointment_id": appointment.id}, record.id,
                                   "appointments", appointment.id)
    assert (await practice.push(cancelled)).status == "pushed"
    path = f"/v1/individual_appointments/{outcome_booked.external_id}/cancel"
    [cancel] = fake.received("PATCH", path)
    assert cancel.body["cancellation_reason"] == 50  # "Other", a documented code
    assert fake.appointments[outcome_booked.external_id]["cancelled_at"]
    assert (await practice.push(cancelled)).status == "already_there"
    assert len(fake.received("PATCH", path)) == 1


async def test_a_reschedule_books_the_new_time_and_frees_the_old(db, clinic, cliniko):
    fake, _, practice = cliniko
    record, created_event = await new_patient(db, clinic, first_name="Ivo", email=None)
    await practice.push(created_event)
    first, second = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=2)))[:2]
    old = await scheduling.book(db.pool, first, patient_id=record.id, call_id=None)
    await practice.push(await pushed_event(db, clinic, "appointment_booked",
                                           {"appointment_id": old.id}, record.id))
    new = await scheduling.book(db.pool, second, patient_id=record.id, call_id=None,
                                replaces=old.id)

    moved = await pushed_event(db, clinic, "appointment_rescheduled",
                               {"appointment_id": new.id, "replaces": old.id}, record.id)
    outcome = await practice.push(moved)

    old_external = await external_id(db, "appointments", old.id)
    assert outcome.status == "pushed" and outcome.external_id != old_external
    assert not fake.appointments[outcome.external_id]["cancelled_at"]
    assert fake.appointments[old_external]["cancelled_at"]
    assert len(fake.received("POST", "/v1/individual_appointments")) == 2
    assert (await practice.push(moved)).status == "already_there"
    assert len(fake.received("PATCH")) == 1


async def test_an_appointment_the_clinic_had_in_cliniko_is_found_to_cancel(db, clinic, cliniko):
    fake, ids, practice = cliniko
    theirs = fake.add_patient("Nora", "Quinn", date(1980, 5, 17))
    record, created_event = await new_patient(db, clinic)
    await practice.push(created_event)  # matched to the clinic's own record
    slot = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=5)))[0]
    who = "Okafor" if slot.practitioner_name == "Dr. James Okafor" else "Patel"
    already = fake.add_appointment(theirs, ids[who], ids["follow-up"], ids["Downtown"],
                                   slot.starts_at)
    appointment = await scheduling.book(db.pool, slot, patient_id=record.id, call_id=None)
    await scheduling.cancel(db.pool, appointment.id, patient_id=record.id, call_id=None)

    outcome = await practice.push(await pushed_event(
        db, clinic, "appointment_cancelled", {"appointment_id": appointment.id}, record.id))

    assert (outcome.status, outcome.external_id) == ("pushed", already)
    assert fake.appointments[already]["cancelled_at"]
    assert await external_id(db, "appointments", appointment.id) == already


async def test_cancelling_what_cliniko_never_had_changes_nothing(db, clinic, cliniko):
    fake, _, practice = cliniko
    record, _ = await new_patient(db, clinic, first_name="Rui")
    slot = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=6)))[0]
    appointment = await scheduling.book(db.pool, slot, patient_id=record.id, call_id=None)
    await scheduling.cancel(db.pool, appointment.id, patient_id=record.id, call_id=None)

    outcome = await practice.push(await pushed_event(
        db, clinic, "appointment_cancelled", {"appointment_id": appointment.id}, record.id))

    assert outcome.status == "already_there" and not fake.received("PATCH")


async def test_a_booking_whose_answer_was_lost_is_not_made_twice(db, clinic, cliniko):
    fake, _, _ = cliniko
    record, created_event = await new_patient(db, clinic, first_name="Lena")
    impatient = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT,
                                base_url=fake.base_url, timeout_s=0.3)
    try:
        await impatient.push(created_event)
        slot = (await fortnight(impatient, clinic, first_day=TODAY + timedelta(days=3)))[0]
        appointment = await scheduling.book(db.pool, slot, patient_id=record.id, call_id=None)
        booked = await pushed_event(db, clinic, "appointment_booked",
                                    {"appointment_id": appointment.id}, record.id)
        fake.fail_next(None, delay_s=1.0, only="POST /v1/individual_appointments")
        with pytest.raises(PMSError, match="did not answer in time"):
            await impatient.push(booked)

        retried = await impatient.push(booked)
    finally:
        await impatient.aclose()
    assert retried.status == "already_there" and len(fake.appointments) == 1
    assert await external_id(db, "appointments", appointment.id) == retried.external_id


async def test_a_contact_change_updates_the_cliniko_patient_once(db, clinic, cliniko):
    fake, _, practice = cliniko
    record, created_event = await new_patient(db, clinic, first_name="Omar")
    cliniko_id = (await practice.push(created_event)).external_id
    _, event_id = await world.update_contact(
        db.pool, clinic["workspace"], record.id,
        {"email": "omar.q@example.com", "phone": "+15550100288"}, VERIFIED)
    changed = (await world.events_by_ids(db.pool, [event_id]))[0]

    assert (await practice.push(changed)).status == "pushed"
    [put] = fake.received("PUT", f"/v1/patients/{cliniko_id}")
    assert put.body == {"email": "omar.q@example.com", "patient_phone_numbers": [
        {"phone_type": "Mobile", "number": "+15550100288"}]}
    assert fake.patients[cliniko_id]["email"] == "omar.q@example.com"
    assert (await practice.push(changed)).status == "already_there"
    assert len(fake.received("PUT")) == 1


async def test_a_reported_contact_for_a_patient_cliniko_lacks_creates_them_with_it(
    db, clinic, cliniko
):
    fake, _, practice = cliniko
    margaret = (await scheduling.patients_by_phone(db.pool, clinic["workspace"],
                                                   "+15550100201"))[0]
    reported = await pushed_event(db, clinic, "contact_reported",
                                  {"changes": {"phone": "+15550100277"}}, margaret.id)

    outcome = await practice.push(reported)

    [post] = fake.received("POST", "/v1/patients")
    assert post.body["first_name"] == margaret.first_name
    assert post.body["patient_phone_numbers"] == [{"phone_type": "Mobile",
                                                   "number": "+15550100277"}]
    assert outcome.status == "pushed"
    assert await external_id(db, "patients", margaret.id) == outcome.external_id


async def test_a_patient_the_clinic_already_has_in_cliniko_is_matched_not_duplicated(
    db, clinic, cliniko
):
    fake, _, practice = cliniko
    theirs = fake.add_patient("Nora", "Quinn", date(1980, 5, 17))
    record, created_event = await new_patient(db, clinic)

    outcome = await practice.push(created_event)

    assert (outcome.status, outcome.external_id) == ("already_there", theirs)
    assert not fake.received("POST") and await external_id(db, "patients", record.id) == theirs


async def test_an_event_type_cliniko_does_not_take_is_unsupported(db, clinic, cliniko):
    fake, _, practice = cliniko
    record, _ = await new_patient(db, clinic, first_name="Ada")
    event = await pushed_event(db, clinic, "insurance_added",
                               {"carrier_name": "Acme", "member_id": "X1"}, record.id)

    outcome = await practice.push(event)

    assert outcome.status == "unsupported" and "insurance_added" in outcome.detail
    assert not fake.requests


async def test_another_patients_appointment_is_never_pushed(db, clinic, cliniko):
    fake, _, practice = cliniko
    mine, _ = await new_patient(db, clinic, first_name="Mia")
    theirs, _ = await new_patient(db, clinic, first_name="Theo")
    slot = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=4)))[0]
    appointment = await scheduling.book(db.pool, slot, patient_id=theirs.id, call_id=None)
    calls_before = len(fake.requests)

    outcome = await practice.push(await pushed_event(
        db, clinic, "appointment_booked", {"appointment_id": appointment.id}, mine.id))

    assert outcome.status == "unsupported" and len(fake.requests) == calls_before


# --- Failures ---------------------------------------------------------------------------


async def test_a_bad_key_is_a_pms_error_that_never_shows_the_key(db, clinic, cliniko):
    fake, _, _ = cliniko
    wrong = "MS0xV3JvbmdLZXk-au1"
    practice = ClinikoPractice(db.pool, api_key=wrong, user_agent=AGENT, base_url=fake.base_url)
    record, created_event = await new_patient(db, clinic, first_name="Una")
    try:
        with pytest.raises(PMSError, match="401") as slots_error:
            await fortnight(practice, clinic)
        with pytest.raises(PMSError, match="401") as push_error:
            await practice.push(created_event)
    finally:
        await practice.aclose()
    for error in (slots_error.value, push_error.value):
        assert wrong not in str(error) and "MS0x" not in str(error)
    assert not fake.patients and await external_id(db, "patients", record.id) is None


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_a_server_error_is_a_pms_error(db, clinic, cliniko, status):
    fake, _, practice = cliniko
    fake.fail_next(status)
    with pytest.raises(PMSError, match=f"server error \\({status}\\)"):
        await fortnight(practice, clinic)


async def test_the_rate_limit_is_a_pms_error_with_its_reset_time(db, clinic, cliniko):
    fake, _, practice = cliniko
    reset = datetime(2026, 11, 23, 16, 1, 30, tzinfo=UTC)
    fake.fail_next(429, reset_at=reset)
    with pytest.raises(ClinikoRateLimited) as error:
        await fortnight(practice, clinic)
    assert isinstance(error.value, PMSError) and error.value.reset_at == reset


async def test_a_slow_cliniko_is_a_pms_error(db, clinic, cliniko):
    fake, _, _ = cliniko
    practice = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT, base_url=fake.base_url,
                               timeout_s=0.2)
    fake.fail_next(None, delay_s=1.0)
    try:
        with pytest.raises(PMSError, match="did not answer in time"):
            await fortnight(practice, clinic)
    finally:
        await practice.aclose()


async def test_an_unreachable_cliniko_is_a_pms_error(db, clinic):
    practice = ClinikoPractice(db.pool, api_key=KEY, user_agent=AGENT,
                               base_url="http://127.0.0.1:9/v1")
    try:
        with pytest.raises(PMSError, match="unreachable"):
            await fortnight(practice, clinic)
    finally:
        await practice.aclose()


async def test_an_answer_of_the_wrong_shape_is_a_pms_error(db, clinic, cliniko):
    fake, _, practice = cliniko
    fake.fail_next(200, body={"surprise": []})
    with pytest.raises(PMSError, match="unexpected"):
        await fortnight(practice, clinic)


async def test_a_pagination_link_to_another_host_is_not_followed(db, clinic, cliniko):
    fake, _, practice = cliniko
    fake.fail_next(200, body={"appointment_types": [], "total_entries": 9, "links": {
        "next": "https://collector.example/v1/appointment_types?page=2"}},
        only="GET /v1/appointment_types")
    with pytest.raises(PMSError, match="another host"):
        await fortnight(practice, clinic)


async def test_data_cliniko_rejects_is_a_pms_error_naming_the_field(db, clinic, cliniko):
    fake, _, practice = cliniko
    _, created_event = await new_patient(db, clinic, first_name="Eve", email="not-an-email")
    with pytest.raises(PMSError, match="422: email"):
        await practice.push(created_event)
    assert not fake.patients


async def test_the_fake_refuses_what_cliniko_refuses(cliniko):
    fake, _, _ = cliniko
    good = {"Accept": "application/json", "User-Agent": AGENT}
    async with httpx.AsyncClient(base_url=fake.base_url) as http:
        anonymous = await http.get("/businesses", headers=good)
        no_agent = await http.get("/businesses", auth=(KEY, ""),
                                  headers={"Accept": "application/json", "User-Agent": "x"})
        unsharded = await http.get("/businesses", auth=(KEY.rsplit("-", 1)[0], ""),
                                   headers=good)
        unknown = await http.get(
            f"/businesses/{next(iter(fake.businesses))}/practitioners/x", auth=(KEY, ""),
            headers=good)
    assert (anonymous.status_code, no_agent.status_code, unsharded.status_code,
            unknown.status_code) == (401, 403, 200, 404)


# --- Settings and the factory -------------------------------------------------------------


def test_the_shard_in_the_key_picks_the_api_host():
    assert base_url_for("abc123-uk1") == "https://api.uk1.cliniko.com/v1"
    assert base_url_for("abc123-AU2") == "https://api.au2.cliniko.com/v1"
    assert base_url_for("abc123") == "https://api.au1.cliniko.com/v1"
    with pytest.raises(ValueError, match="shard"):
        base_url_for("abc123-nowhere")


async def test_settings_choose_the_practice_system(db):
    with pytest.raises(ValidationError, match="CLINIKO_API_KEY"):
        Settings(_env_file=None, pms_provider="cliniko")
    with pytest.raises(ValidationError, match="cliniko_user_agent"):
        Settings(_env_file=None, cliniko_user_agent="no contact")

    assert isinstance(build_practice(Settings(_env_file=None), db.pool), BuiltinPractice)
    chosen = build_practice(Settings(_env_file=None, pms_provider="cliniko",
                                     cliniko_api_key="abc123-uk1"), db.pool)
    assert isinstance(chosen, ClinikoPractice) and chosen.name == "cliniko"
    await chosen.aclose()
    with pytest.raises(ValueError, match="shard"):
        build_practice(Settings(_env_file=None, pms_provider="cliniko",
                                cliniko_api_key="abc123-nowhere"), db.pool)


# --- Holding a slot on the call ------------------------------------------------------------


async def live_at(db, slot) -> int:
    return await db.pool.fetchval(
        "SELECT count(*) FROM appointments WHERE practitioner_id = $1 AND starts_at = $2 "
        "AND status IN ('booked', 'confirmed')", uuid.UUID(slot.practitioner_id), slot.starts_at)


@pytest.mark.parametrize("system", ["builtin", "cliniko"])
async def test_two_callers_booking_one_slot_get_one_booking_and_one_conflict(
    db, clinic, cliniko, system
):
    _, _, cloud = cliniko
    practice = cloud if system == "cliniko" else BuiltinPractice(db.pool)
    slot = (await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1)))[0]
    first, _ = await new_patient(db, clinic)
    second, _ = await new_patient(db, clinic, first_name="Omar", last_name="Haddad",
                                  phone="+15550100298", email=None)

    outcomes = await asyncio.gather(
        practice.book(slot, patient_id=first.id, call_id=None),
        practice.book(slot, patient_id=second.id, call_id=None),
    )

    made = [o for o in outcomes if isinstance(o, BookingMade)]
    conflicts = [o for o in outcomes if isinstance(o, SlotConflict)]
    assert len(made) == 1 and len(conflicts) == 1
    assert made[0].appointment.starts_at == slot.starts_at and conflicts[0].slot == slot
    assert await live_at(db, slot) == 1


async def test_a_slot_the_front_desk_took_in_cliniko_is_a_conflict_and_nothing_is_held(
    db, clinic, cliniko
):
    fake, ids, practice = cliniko
    slot = next(s for s in await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1))
                if s.practitioner_id == clinic["people"]["Dr. Maya Patel"])
    walk_in = fake.add_patient("Walk", "In", date(1970, 1, 1))
    fake.add_appointment(walk_in, ids["Patel"], ids["follow-up"], ids["Downtown"], slot.starts_at)
    record, _ = await new_patient(db, clinic)

    outcome = await practice.book(slot, patient_id=record.id, call_id=None)

    assert outcome == SlotConflict(slot, "cliniko")
    assert await live_at(db, slot) == 0
    assert not fake.received("POST", "/v1/individual_appointments")  # nothing pushed either


async def test_a_retired_practitioner_or_place_is_never_offered_or_booked_through_cliniko(
    db, clinic, cliniko
):
    fake, _, practice = cliniko
    okafor = clinic["people"]["Dr. James Okafor"]
    his = next(s for s in await fortnight(practice, clinic, first_day=TODAY + timedelta(days=1))
               if s.practitioner_id == okafor)
    await db.pool.execute("UPDATE practitioners SET retired_at = now() WHERE id = $1",
                          uuid.UUID(okafor))
    await db.pool.execute("UPDATE locations SET retired_at = now() WHERE id = $1",
                          uuid.UUID(clinic["places"]["Northside"]))
    record, _ = await new_patient(db, clinic)

    offered = await fortnight(practice, clinic)
    outcome = await practice.book(his, patient_id=record.id, call_id=None)

    assert offered and {s.practitioner_id for s in offered}.isdisjoint(
        {okafor, clinic["people"]["Dr. Sofia Reyes"]})  # Reyes works only at Northside here
    assert isinstance(outcome, SlotConflict) and await live_at(db, his) == 0
    assert not fake.received("POST", "/v1/individual_appointments")
