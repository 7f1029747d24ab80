"""An identified caller is known across calls: what they told earlier calls is in the
agent's context and searchable by meaning, and a second call the same day starts from
what the first one did. Nobody else's past is ever said or shown."""

import uuid
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from db import memories
from db import repositories as repo
from db import scheduling as sched
from db.memories import MemoryCandidate
from services.embeddings import LocalEmbedder
from tests.flows.callers import FAMILY_PHONE, PRIYA_PHONE, call_from

EMBEDDER = LocalEmbedder()
BOOKED = "booked a physiotherapy appointment for Tuesday 3 December at 10 AM"
HOURS = "asked about our opening hours"


async def patient_on(db, clinic, phone: str) -> sched.Patient:
    return (await sched.patients_by_phone(db.pool, clinic[0], phone))[0]


async def start_of_clinic_today(db, clinic) -> datetime:
    zone = ZoneInfo((await sched.locations(db.pool, clinic[1]))[0].timezone)
    return datetime.combine(datetime.now(zone).date(), time(0), tzinfo=zone)


async def analysed_call(db, clinic, patient_id: str, started: datetime, summary: dict) -> str:
    """An earlier call of the patient's, with its analysis (as the after-call job leaves it)."""
    workspace_id, service_id = clinic
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service_id, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status="completed")
    await db.pool.execute("UPDATE calls SET patient_id = $2, started_at = $3 WHERE id = $1",
                          uuid.UUID(call_id), uuid.UUID(patient_id), started)
    await db.pool.execute(
        """INSERT INTO call_analyses (call_id, workspace_id, patient_id, analyst, summary,
                                      quality, quality_score, duration_ms)
           VALUES ($1, $2, $3, 'rules', $4, '{}'::jsonb, 4, 10)""",
        uuid.UUID(call_id), uuid.UUID(workspace_id), uuid.UUID(patient_id), summary)
    return call_id


def summary(done: list[str] = (), wanted: str = "to book physiotherapy") -> dict:
    return {"wanted": [{"text": wanted, "recap": HOURS if not done else "wanted a booking",
                        "turns": [1]}],
            "done": [{"kind": "booked", "text": "booked", "recap": recap, "turns": [3]}
                     for recap in done],
            "left_for_person": [], "concerns": []}


async def test_a_caller_ringing_again_today_hears_what_they_did_earlier_once(db, clinic):
    priya = await patient_on(db, clinic, PRIYA_PHONE)
    today = await start_of_clinic_today(db, clinic)
    await analysed_call(db, clinic, priya.id, today - timedelta(hours=2),
                        summary(["cancelled an appointment last week"]))  # yesterday's
    await analysed_call(db, clinic, priya.id, today + timedelta(seconds=1), summary([BOOKED]))
    await analysed_call(db, clinic, priya.id, today + timedelta(seconds=2), summary())

    caller = await call_from(db, clinic, PRIYA_PHONE)
    first = await caller.says("hi, I have a question about parking")
    second = await caller.says("is there parking near the clinic?")

    assert first.startswith(f"Welcome back, Priya. Earlier today you {BOOKED} and {HOURS}. ")
    assert "cancelled" not in first
    assert "Welcome back" not in second and "Earlier today" not in second
    # the engage LLM has it too
    assert f"Earlier today the caller {BOOKED} and {HOURS}." in caller.engine.ambient()


async def test_a_caller_on_a_shared_phone_or_an_unknown_number_hears_no_ones_past(db, clinic):
    robert = await patient_on(db, clinic, FAMILY_PHONE)  # shares the phone with his family
    today = await start_of_clinic_today(db, clinic)
    await analysed_call(db, clinic, robert.id, today + timedelta(seconds=1), summary([BOOKED]))
    await memories.remember(db.pool, robert.id, [MemoryCandidate(
        "I need a Spanish interpreter", "preference")], EMBEDDER, None)

    family = await call_from(db, clinic, FAMILY_PHONE)
    stranger = await call_from(db, clinic, "+15550109999")
    for caller in (family, stranger):
        said = await caller.says("hi, I'd like to book an appointment")
        assert "Welcome back" not in said and "Earlier today" not in said
        assert "Earlier today" not in caller.engine.ambient()
        assert "Spanish" not in caller.engine.ambient()
        refused = await caller.engine.tools.call("booking_discovery", "SearchMemories",
                                                 {"query": "language"})
        assert refused.error_class == "guard"


async def test_what_the_caller_told_earlier_calls_is_in_context_and_found_by_meaning(
        db, clinic):
    priya = await patient_on(db, clinic, PRIYA_PHONE)
    earlier = await repo.create_call(
        db.pool, workspace_id=clinic[0], service_id=clinic[1], call_sid=None,
        direction="inbound", from_number=PRIYA_PHONE, to_number=None, status="completed")
    await memories.remember(db.pool, priya.id, [
        MemoryCandidate("I'm having knee surgery next month", "event", turn_seq=3),
        MemoryCandidate("Mornings are best for me, before work", "preference", turn_seq=5),
        MemoryCandidate("I can't drive so I need transport", "fact", turn_seq=7),
    ], EMBEDDER, earlier)

    caller = await call_from(db, clinic, PRIYA_PHONE)
    ambient = caller.engine.ambient()
    operation = await caller.engine.tools.call("booking_discovery", "SearchMemories",
                                               {"query": "has she got an operation coming up"})
    getting_here = await caller.engine.tools.call(
        "booking_discovery", "SearchMemories", {"query": "does she need a ride"})

    assert "What the caller told us on earlier calls" in ambient
    assert '"I\'m having knee surgery next month" (event,' in ambient
    assert operation.ok and "I'm having knee surgery next month" in operation.text
    assert "transport" not in operation.text
    assert getting_here.ok and "I can't drive so I need transport" in getting_here.text


async def test_over_budget_the_memories_go_before_the_chart(db, clinic):
    from flows.ambient import ambient_context, clinic_sections, patient_sections

    priya = await patient_on(db, clinic, PRIYA_PHONE)
    call = await repo.create_call(
        db.pool, workspace_id=clinic[0], service_id=clinic[1], call_sid=None,
        direction="inbound", from_number=PRIYA_PHONE, to_number=None, status="completed")
    await memories.remember(db.pool, priya.id, [
        MemoryCandidate(f"I prefer {day}s for my appointments " + "really " * 20, "preference")
        for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")], EMBEDDER, call)
    caller = await call_from(db, clinic, PRIYA_PHONE)
    session = caller.engine.session

    sections = patient_sections(session) + clinic_sections(session, None)
    roomy = ambient_context(session, budget=10_000)
    # room for everything but the clinic's services and locations, and the memories
    budget = sum(len(body) + 1 for name, body in sections
                 if name not in ("services", "locations", "memories"))
    tight = ambient_context(session, budget=budget)

    assert "told us on earlier calls" in roomy
    assert "told us on earlier calls" not in tight and "Appointment types" not in tight
    assert "The caller: Priya Nair" in tight and dict(sections)["calendar"] in tight
