"""A clinic in Denver, on a server whose clock reads UTC, closed one Wednesday for staff
training: a caller who rings at 10 PM or on that Wednesday hears the clinic is closed and
when it opens, can still book (never on the closure), leave a callback request, or get
the emergency guidance exactly as during opening hours; questions about hours,
addresses and prices are answered per location from the clinic's data."""

import json
import random
import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import yaml

from call.call_session import SessionMode
from config import Settings
from db import repositories as repo
from db import scheduling as sched
from db.seed import seed_clinic
from flows.graph import GRAPHS_DIR, ContextGraph, parse_graph
from runner.call_setup import new_session
from runner.runtime import AppRuntime
from tests.flows.callers import GRAPH, PRIYA_PHONE, Caller, call_from
from tests.worker_pools import pools_left_to_the_next_app

DENVER = ZoneInfo("America/Denver")


def next_tuesday() -> date:
    """A Tuesday at least two days ahead (closures are read from today on)."""
    soon = date.today() + timedelta(days=2)
    return soon + timedelta(days=(1 - soon.weekday()) % 7)


TUESDAY = next_tuesday()
WEDNESDAY, THURSDAY = TUESDAY + timedelta(days=1), TUESDAY + timedelta(days=2)
FRIDAY = TUESDAY + timedelta(days=3)


def in_denver(day: date, hour: int) -> datetime:
    """That local time, as a server on UTC reads it."""
    return datetime.combine(day, time(hour), DENVER).astimezone(UTC)


async def move_to_denver_and_close_wednesday(db, service_id: str) -> None:
    await db.pool.execute("UPDATE locations SET timezone = 'America/Denver' WHERE service_id = $1",
                          uuid.UUID(service_id))
    await db.pool.execute(
        """INSERT INTO closures (service_id, starts_on, ends_on, reason)
           VALUES ($1, $2, $2, 'staff training')""", uuid.UUID(service_id), WEDNESDAY)


@pytest.fixture
async def denver(db, clinic):
    """The demo clinic, in Denver, closed on WEDNESDAY for staff training."""
    await move_to_denver_and_close_wednesday(db, clinic[1])
    return clinic


async def call_at(db, clinic, moment: datetime, phone: str = PRIYA_PHONE,
                  graph: ContextGraph = GRAPH) -> Caller:
    return await call_from(db, clinic, phone, graph=graph, now=lambda: moment,
                           today=lambda: moment.astimezone(DENVER).date())


async def test_at_10_pm_a_caller_books_and_is_never_offered_the_closure_day(db, denver):
    caller = await call_at(db, denver, in_denver(TUESDAY, 22))

    await caller.says("I'd like to book a follow-up visit")
    offered = await caller.says("Wednesday please")

    slots = caller.engine.session.offered.values()
    local_days = {slot.starts_at.astimezone(DENVER).date() for slot in slots}
    assert slots and WEDNESDAY not in local_days
    assert min(local_days) == THURSDAY
    assert offered.startswith("I have Thursday")
    await caller.says("the first one")
    booked = await caller.says("yes please")
    assert booked.startswith("You're booked.")
    (written,) = caller.tool_calls("CreateAppointment")
    assert written.error_class is None
    kind = next(t for t in await sched.appointment_types(db.pool, denver[1])
                if t.name == "Follow-up visit")
    fortnight = await sched.available_slots(
        db.pool, denver[1], appointment_type=kind, first_day=TUESDAY,
        last_day=TUESDAY + timedelta(days=13), now=in_denver(TUESDAY, 22))
    assert fortnight and all(s.starts_at.astimezone(DENVER).date() != WEDNESDAY
                             for s in fortnight)


async def test_after_hours_an_emergency_gets_the_same_guidance_as_during_hours(db, denver):
    during = await call_at(db, denver, in_denver(TUESDAY, 10))
    after = await call_at(db, denver, in_denver(TUESDAY, 22))
    on_the_closure = await call_at(db, denver, in_denver(WEDNESDAY, 11))

    words = "I have crushing chest pain and I can't breathe"
    said = [await caller.says(words) for caller in (during, after, on_the_closure)]

    assert said[0].startswith("That sounds like it could be an emergency")
    assert "call 911" in said[0]
    guidance = [line.split(" I've also asked our team")[0] for line in said]
    assert guidance[1] == guidance[0] == guidance[2]
    # only when the team can call differs: now, Thursday (Wednesday is closed), tomorrow
    assert "call you shortly." in said[0]
    assert "call you on Thursday from 8 AM." in said[1]
    assert "call you tomorrow morning from 8 AM." in said[2]
    for caller in (after, on_the_closure):
        assert [t.input.get("urgent") for t in caller.tool_calls("EscalateToHuman")] == [True]


async def test_after_hours_a_callback_request_is_logged_for_the_team(db, denver):
    caller = await call_at(db, denver, in_denver(TUESDAY, 22))
    await caller.says("can someone call me back in the morning")
    await caller.says("it's about my test results")
    await caller.says("yes, this number is fine")
    await caller.says("yes")
    request = await db.pool.fetchrow(
        "SELECT message, urgent FROM callback_requests WHERE call_id = $1",
        uuid.UUID(caller.engine.session.call_id))
    assert request is not None and "results" in request["message"] and not request["urgent"]


@pytest.mark.parametrize(("said", "answer"), [
    ("What time does Northside open on Saturday?",
     "Our Northside clinic is open on Saturday from 9 AM to 5 PM."),
    ("what time does the lake avenue clinic open saturday morning?",
     "Our Northside clinic is open on Saturday from 9 AM to 5 PM."),
    ("are you open on wednesday?", "We're closed tomorrow for staff training."),
    ("Will you be open for the staff training?", "We're closed tomorrow for staff training."),
    ("Where's your downtown office?", "Our Downtown clinic is at 120 Main Street."),
    ("Sorry, what's the address for Northside again?",
     "Our Northside clinic is at 45 Lake Avenue."),
    ("how much is a physical?", "An annual physical is $120."),
    ("What does a flu jab cost?", "A flu shot is $30."),
    ("is the lake avenue clinic open now?", "Yes, our Northside clinic is open now, until 5 PM."),
    ("Is Downtown still open?", "Yes, our Downtown clinic is open now, until 7 PM."),
])
async def test_hours_addresses_and_prices_are_answered_per_location(db, denver, said, answer):
    caller = await call_at(db, denver, in_denver(TUESDAY, 10))
    heard = await caller.says(said)
    assert heard.startswith(answer + " ")
    assert heard.endswith("?")  # then back to the caller: anything else, or booking one


async def test_at_night_open_now_says_when_it_opens_and_why_it_stays_shut(db, denver):
    caller = await call_at(db, denver, in_denver(TUESDAY, 22))
    heard = await caller.says("is the lake avenue clinic open now?")
    assert heard.startswith("No, our Northside clinic is closed right now for staff training; "
                            "it opens again Thursday at 8 AM.")
    (lookup,) = caller.tool_calls("GetLocationInfo")
    assert lookup.error_class is None


def graph_stored_before_the_calendar_tool() -> ContextGraph:
    """The booking graph as a service may have stored it before GetLocationInfo existed."""
    data = yaml.safe_load((GRAPHS_DIR / "clinic_booking.yaml").read_text())
    del data["tools"]["GetLocationInfo"]
    for group in ("BASE_TOOLS", "LOOKUPS"):
        data["tool_sets"][group].remove("GetLocationInfo")
    data["super_states"]["qa"]["tools"].remove("GetLocationInfo")
    data["states"]["hours"]["tools"] = []
    return parse_graph(data, "stored graph")


async def test_a_graph_stored_before_the_calendar_tool_still_answers_from_the_calendar(
        db, denver):
    caller = await call_at(db, denver, in_denver(TUESDAY, 22),
                           graph=graph_stored_before_the_calendar_tool())
    heard = await caller.says("is the lake avenue clinic open now?")
    assert heard.startswith("No, our Northside clinic is closed right now for staff training; "
                            "it opens again Thursday at 8 AM.")
    assert caller.tool_calls("GetLocationInfo") == []  # nothing refused, nothing asked


async def test_the_llm_context_knows_it_is_closed_the_next_opening_and_the_closure(db, denver):
    caller = await call_at(db, denver, in_denver(TUESDAY, 22))
    context = caller.engine.ambient()
    assert ("Now (Tuesday 10 PM at the clinic): closed (staff training); opens next: "
            "Downtown Thursday at 8 AM.") in context
    assert (f"Closed in the next 14 days: {WEDNESDAY:%B} {WEDNESDAY.day}, every location "
            "(staff training).") in context


def phone() -> str:
    return f"+1555{random.randrange(10**6, 10**7)}"


async def test_the_greeting_says_when_the_clinic_opens_again_and_why_it_is_closed(
        tmp_path, pg_dsn, db, workspace_id, monkeypatch):
    clinic_number, northside_number = phone(), phone()
    service = await repo.create_service(db.pool, workspace_id, f"denver-{uuid.uuid4().hex[:6]}",
                                        phone_number=clinic_number)
    await seed_clinic(db.pool, workspace_id, service["id"], date.today())
    await move_to_denver_and_close_wednesday(db, service["id"])
    await db.pool.execute(
        "UPDATE locations SET phone_number = $2 WHERE service_id = $1 AND name = 'Northside'",
        uuid.UUID(service["id"]), northside_number)
    runtime = await AppRuntime.start(Settings(
        _env_file=None, data_dir=tmp_path, database_url=pg_dsn, emergency_number="000"))
    try:
        async def greeting_at(moment: datetime, number: str = clinic_number):
            runtime.clock = lambda: moment
            return await runtime.resolve_profile(str(uuid.uuid4()), number)

        open_hours = await greeting_at(in_denver(TUESDAY, 10))
        evening = await greeting_at(in_denver(TUESDAY, 22))
        holiday = await greeting_at(in_denver(WEDNESDAY, 10))
        dialled_northside = await greeting_at(in_denver(FRIDAY, 20), northside_number)

        async def unreadable(*args, **kwargs):
            raise OSError("calendar unreadable")
        monkeypatch.setattr(sched, "closures", unreadable)
        unknown = await greeting_at(in_denver(TUESDAY, 22))
        for profile in (evening, unknown):  # the call starts: its record says what was heard
            profile.call_id = await repo.create_call(
                db.pool, workspace_id=workspace_id, service_id=profile.service_id,
                call_sid=None, direction="eval", from_number=None, to_number=clinic_number,
                status="ringing")
            new_session(runtime, profile, SessionMode.TEXT)
    finally:
        with pools_left_to_the_next_app():
            await runtime.close()

    plain = ("Thank you for calling {}. This is the scheduling assistant. How can I help you "
             "today?").format(service["name"])
    assert open_hours.greeting == plain and open_hours.after_hours is None
    assert evening.service_id == service["id"]
    assert evening.greeting == (
        f"Thank you for calling {service['name']}. This is the scheduling assistant. "
        "We're closed right now for staff training; we open again Thursday at 8 AM. "
        "I can still book an appointment or take a message for a callback, and if this is an "
        "emergency, please hang up and call 000. How can I help you today?")  # as configured
    assert evening.after_hours == {
        "place": None, "reason": "staff training",
        "next_opening": datetime.combine(THURSDAY, time(8), DENVER).isoformat()}
    assert ("We're closed right now for staff training; we open again tomorrow at 8 AM."
            in holiday.greeting)
    # Northside's own number, Friday evening: Northside opens Saturday at 9 (Downtown,
    # closed on Saturdays, opens Monday: its hours are not Northside's)
    assert ("Our Northside clinic is closed right now; it opens again tomorrow at 9 AM."
            in dialled_northside.greeting)
    # the calendar could not be read: the plain greeting, and why, on the call's record
    assert unknown.greeting == plain and unknown.calendar_problems == ["OSError"]
    assert await events(db, evening.call_id, "after_hours") == [evening.after_hours]
    assert await events(db, unknown.call_id, "calendar_unavailable") == [{"error": "OSError"}]


async def events(db, call_id: str, kind: str) -> list[dict]:
    rows = await db.pool.fetch("SELECT data FROM call_events WHERE call_id = $1 AND type = $2",
                               uuid.UUID(call_id), kind)
    return [json.loads(row["data"]) if isinstance(row["data"], str) else dict(row["data"])
            for row in rows]
