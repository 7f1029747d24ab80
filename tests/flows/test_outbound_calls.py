"""Calls the clinic makes, walked offline: who answers is checked before anything about
the patient's care is said, "please don't call me again" is honoured anywhere, and each
call closes its task with what it found.

No LLM: the deterministic navigator, the real tools over the embedded database and the
spoken lines of prompts/actions.yaml, as `make run` answers with no keys.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from db import outbound
from db import scheduling as sched
from db.seed import seed_check_in_line
from flows.graph import bundled_graph
from flows.router import TaskKind
from language.spoken import say_phone, say_time
from tests.flows.callers import CLINIC_NUMBER, PRIYA_PHONE, Callee, call_from, call_to

MARGARET_PHONE = "+15550100201"
# What a wrong person must never hear about Margaret: her surname, her appointment and
# why the clinic called.
MARGARETS_CARE = re.compile(
    r"Chen|follow-up|Maya Patel|appointment|test results|waitlist|booking|reminder",
    re.IGNORECASE)


async def margaret(db, clinic) -> sched.Patient:
    (found,) = await sched.patients_by_phone(db.pool, clinic[0], MARGARET_PHONE)
    return found


async def task(db, clinic, callee: Callee) -> outbound.OutboundTask:
    return await outbound.get_task(db.pool, clinic[0], callee.task_id)


async def callback_to_margaret(db, clinic) -> Callee:
    patient = await margaret(db, clinic)
    return await call_to(db, clinic, MARGARET_PHONE, kind="callback", patient_id=patient.id)


# --- The right-person check -----------------------------------------------------------


async def test_the_greeting_says_who_is_calling_and_asks_for_the_person_by_first_name(db, clinic):
    callee = await callback_to_margaret(db, clinic)

    assert callee.heard == [
        "Hello, this is Demo Family Clinic calling. May I speak with Margaret, please?"]
    assert callee.engine.session.patient is None  # nobody is identified by the number


async def test_the_right_person_confirms_their_birth_date_then_hears_why_the_clinic_called(
    db, clinic
):
    callee = await callback_to_margaret(db, clinic)

    asked = await callee.says("Yes, speaking.")
    assert "date of birth" in asked and not MARGARETS_CARE.search(asked)
    assert callee.engine.session.patient is None

    told = await callee.says("March fourteenth, nineteen forty-eight")

    assert told == ("Thank you, Margaret. You asked us to call you back about the test "
                    "results they asked about. How can I help?")
    assert callee.engine.session.patient.id == (await margaret(db, clinic)).id


@pytest.mark.parametrize(("answer", "outcome", "detail"), [
    ("Sorry, you have the wrong number.", "wrong_person", "wrong number"),
    ("There's no Margaret here.", "wrong_person", "wrong number"),
    ("She's not here right now, can I take a message?", "wrong_person", "not available"),
    ("No.", "wrong_person", "declined"),
])
async def test_a_wrong_person_hears_nothing_about_why_the_clinic_called(
    db, clinic, answer, outcome, detail
):
    callee = await callback_to_margaret(db, clinic)

    await callee.says(answer)

    assert callee.last.end_call
    assert not MARGARETS_CARE.search(callee.agent_said), callee.agent_said
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome, ended.last_error) == ("failed", outcome, detail)
    assert callee.engine.session.patient is None


async def test_someone_else_is_offered_only_the_clinics_own_number(db, clinic):
    callee = await callback_to_margaret(db, clinic)

    goodbye = await callee.says("She's at work, sorry.")

    assert say_phone(CLINIC_NUMBER) in goodbye and goodbye.endswith("goodbye.")
    assert callee.last.end_call


async def test_a_birth_date_that_does_not_match_twice_ends_the_call_saying_nothing(db, clinic):
    callee = await callback_to_margaret(db, clinic)
    await callee.says("Yeah, that's me.")

    again = await callee.says("January 1st 1960")
    assert "again" in again and callee.engine.session.patient is None
    await callee.says("the fifth of May, nineteen fifty")

    assert callee.last.end_call
    assert "can't go on without confirming" in callee.heard[-1]
    assert not MARGARETS_CARE.search(callee.agent_said), callee.agent_said
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome) == ("failed", "failed")


async def test_asking_what_it_is_about_before_the_check_reveals_nothing(db, clinic):
    callee = await callback_to_margaret(db, clinic)
    await callee.says("Who's this? What's it about?")
    await callee.says("Yes it's me. Is this about my appointment? When is it?")
    await callee.says("I'd like to cancel my appointment")

    assert not MARGARETS_CARE.search(callee.agent_said), callee.agent_said
    assert [c for c in callee.tool_calls() if c.error_class is None] == []
    assert callee.engine.session.patient is None


async def test_a_callback_to_a_number_with_no_record_asks_whether_they_asked_for_it(
    db, clinic
):
    callee = await call_to(db, clinic, "+15550100288", kind="callback", patient_id=None,
                           reason="a question about parking")
    assert callee.heard[0].startswith("Hello, this is Demo Family Clinic, returning a call")

    told = await callee.says("Yes, that was me.")

    assert told == ("Thank you. You asked us to call you back about a question about "
                    "parking. How can I help?")  # no name on record: none said, no gap
    assert callee.engine.session.patient is None  # nobody to identify: no record


# --- "Please don't call me again" ---------------------------------------------------------


@pytest.mark.parametrize("words", [
    "Please don't call me again.",
    "Take me off your list.",
    "Stop calling me!",
    "Can you remove my number please",
    "I don't want any more calls from you",
])
async def test_asked_not_to_be_called_before_the_check_the_number_is_recorded(
    db, clinic, words
):
    callee = await callback_to_margaret(db, clinic)

    goodbye = await callee.says(words)

    assert "won't call you again" in goodbye and callee.last.end_call
    assert not MARGARETS_CARE.search(callee.agent_said)
    assert await db.pool.fetchval(
        "SELECT count(*) FROM do_not_call_numbers WHERE workspace_id = $1 AND phone = $2",
        uuid.UUID(clinic[0]), MARGARET_PHONE) == 1
    patient = await margaret(db, clinic)
    assert not await db.pool.fetchval(
        "SELECT do_not_call FROM patients WHERE id = $1", uuid.UUID(patient.id))
    (event,) = callee.writer.events("do_not_call")
    assert event.data["scope"] == "number"
    ended = await task(db, clinic, callee)
    assert ended.outcome == "opted_out" and ended.status != "pending"


@pytest.mark.parametrize("words", [
    "Actually, please stop phoning me.",
    "Look, just put me on your do not call list.",
])
async def test_asked_not_to_be_called_after_the_check_the_patient_is_recorded(
    db, clinic, words
):
    callee = await callback_to_margaret(db, clinic)
    await callee.says("Speaking.")
    await callee.says("14 March 1948")

    goodbye = await callee.says(words)

    assert "won't call you again" in goodbye and callee.last.end_call
    patient = await margaret(db, clinic)
    assert await db.pool.fetchval(
        "SELECT do_not_call FROM patients WHERE id = $1", uuid.UUID(patient.id))
    (event,) = callee.writer.events("do_not_call")
    assert event.data["scope"] == "patient"
    assert (await task(db, clinic, callee)).outcome == "opted_out"


async def test_a_booking_after_the_check_ends_the_task_answered(db, clinic):
    callee = await callback_to_margaret(db, clinic)
    await callee.says("Speaking.")
    await callee.says("14 March 1948")

    asked = await callee.says("I'd like to book a flu shot")
    assert "What day or time" in asked
    await callee.says("next week in the morning")
    await callee.says("the first one")
    booked = await callee.says("yes please")
    assert booked.startswith("You're booked.")
    bye = await callee.says("No, that's everything, goodbye.")

    assert bye == "Thank you for your time. Goodbye." and callee.last.end_call
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome, ended.last_error) == ("done", "answered", "booked")


# --- Offering a waitlisted patient a slot that just opened --------------------------------

DAVID_PHONE = "+15550100203"
PRIYAS_BIRTH_DATE, DAVIDS_BIRTH_DATE = "September 30th, 1985", "January 25th, 1990"


async def opened_slot(db, clinic) -> tuple[sched.Slot, dict]:
    """A free physiotherapy time next week, as a waitlist offer names it."""
    kind = next(t for t in await sched.appointment_types(db.pool, clinic[1])
                if t.name.startswith("Physio"))
    today = sched.datetime.now().astimezone().date()
    slots = await sched.available_slots(
        db.pool, clinic[1], appointment_type=kind, first_day=today + sched.timedelta(days=7),
        last_day=today + sched.timedelta(days=13), now=sched.datetime.now().astimezone())
    slot = slots[0]
    return slot, {"practitioner_id": slot.practitioner_id, "location_id": slot.location_id,
                  "appointment_type_id": slot.appointment_type_id,
                  "starts_at": slot.starts_at.isoformat(), "ends_at": slot.ends_at.isoformat()}


async def offer_to(db, clinic, phone: str, offer: dict) -> Callee:
    (patient,) = await sched.patients_by_phone(db.pool, clinic[0], phone)
    await sched.add_to_waitlist(db.pool, patient_id=patient.id,
                                appointment_type_id=offer["appointment_type_id"], note="",
                                call_id=None)
    return await call_to(db, clinic, phone, kind="waitlist_offer", patient_id=patient.id,
                         reason="a physiotherapy time opened up", goal="offer the slot",
                         offer=offer)


async def bookings_of(db, clinic, phone: str) -> list[sched.Appointment]:
    (patient,) = await sched.patients_by_phone(db.pool, clinic[0], phone)
    return await sched.upcoming_appointments(db.pool, patient.id,
                                             sched.datetime.now().astimezone())


async def confirmed_for_the_offer(db, clinic, phone: str, born: str, offer: dict) -> Callee:
    callee = await offer_to(db, clinic, phone, offer)
    await callee.says("Yes, speaking.")
    offered = await callee.says(born)
    assert "You're on our waitlist" in offered and offered.endswith("book it for you?")
    return callee


async def test_a_yes_to_the_opened_slot_books_exactly_it(db, clinic):
    slot, offer = await opened_slot(db, clinic)
    callee = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)
    assert await bookings_of(db, clinic, PRIYA_PHONE) == []  # nothing before the yes

    booked = await callee.says("Yes please, book it.")

    assert booked.startswith("You're booked.")
    (appointment,) = await bookings_of(db, clinic, PRIYA_PHONE)
    assert (appointment.starts_at, appointment.practitioner_name) == (
        slot.starts_at, slot.practitioner_name)
    await callee.says("No thanks, bye.")
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome, ended.last_error) == ("done", "answered", "booked")


@pytest.mark.parametrize("nothing_else", ["No.", "Nope.", "No thank you.", "No, I'm good."])
async def test_a_plain_no_to_anything_else_after_the_booking_says_goodbye(db, clinic,
                                                                          nothing_else):
    _, offer = await opened_slot(db, clinic)
    callee = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)
    booked = await callee.says("Yes please.")
    assert booked.startswith("You're booked.") and "anything else" in booked, booked

    bye = await callee.says(nothing_else)

    assert "Goodbye" in bye and callee.last.end_call, bye


async def test_a_no_keeps_them_on_the_waitlist_and_books_nothing(db, clinic):
    _, offer = await opened_slot(db, clinic)
    callee = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)

    kept = await callee.says("No, that time doesn't work for me.")
    assert "keep you on the waitlist" in kept
    await callee.says("No, that's all.")

    assert callee.last.end_call and await bookings_of(db, clinic, PRIYA_PHONE) == []
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome) == ("done", "answered")


async def test_the_first_confirmed_yes_wins_the_slot_and_the_other_hears_it_is_gone(db, clinic):
    slot, offer = await opened_slot(db, clinic)
    priya = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)
    david = await confirmed_for_the_offer(db, clinic, DAVID_PHONE, DAVIDS_BIRTH_DATE, offer)

    assert (await priya.says("Yes please.")).startswith("You're booked.")
    gone = await david.says("Yes, I'll take it.")

    assert "someone else has just taken that time" in gone and "still on the waitlist" in gone
    assert slot.starts_at not in [a.starts_at for a in await bookings_of(db, clinic, DAVID_PHONE)]
    assert [c.error_class for c in david.tool_calls("CreateAppointment")] == ["conflict"]
    (event,) = david.writer.events("slot_taken")
    assert event.data["waitlist_offer"] is True and event.data["next_offered"] is False
    bye = await david.says("No.")
    assert bye == "Thank you for your time. Goodbye." and david.last.end_call
    ended = await task(db, clinic, david)
    assert (ended.status, ended.outcome) == ("done", "slot_gone")


async def test_a_slot_taken_before_it_is_read_out_is_not_offered(db, clinic):
    _, offer = await opened_slot(db, clinic)
    priya = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)
    david = await offer_to(db, clinic, DAVID_PHONE, offer)
    await david.says("Yes, speaking.")
    await priya.says("Yes please.")

    told = await david.says(DAVIDS_BIRTH_DATE)

    assert "it has just been taken" in told and "still on the waitlist" in told
    assert david.tool_calls("CreateAppointment") == []
    await david.says("No thank you.")
    assert (await task(db, clinic, david)).outcome == "slot_gone"


async def test_asked_not_to_be_called_while_being_offered_a_slot(db, clinic):
    _, offer = await opened_slot(db, clinic)
    callee = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)

    goodbye = await callee.says("No. And please don't call me again.")

    assert "won't call you again" in goodbye and callee.last.end_call
    assert callee.tool_calls("CreateAppointment") == []
    assert (await task(db, clinic, callee)).outcome == "opted_out"


# --- Appointment reminders ------------------------------------------------------------------

MARGARETS_BIRTH_DATE = "March 14th, 1948"


async def reminder_to_margaret(db, clinic) -> tuple[Callee, sched.Appointment]:
    patient = await margaret(db, clinic)
    (appointment,) = await sched.upcoming_appointments(
        db.pool, patient.id, sched.datetime.now().astimezone())
    callee = await call_to(db, clinic, MARGARET_PHONE, kind="reminder", patient_id=patient.id,
                           reason="appointment reminder", goal="confirm, cancel or move it",
                           appointment_id=appointment.id)
    await callee.says("Speaking.")
    return callee, appointment


async def test_the_reminder_reads_the_appointment_in_its_locations_time(db, clinic):
    callee, appointment = await reminder_to_margaret(db, clinic)

    read = await callee.says(MARGARETS_BIRTH_DATE)

    assert read == (
        f"Thank you, Margaret. I'm calling to remind you about your follow-up visit with "
        f"{appointment.practitioner_name} at our {appointment.location_name} clinic on "
        f"{say_time(appointment.local_start)}. Will you be able to make it?")
    assert appointment.local_start.tzinfo.key == appointment.timezone != "UTC"


async def test_a_yes_to_the_reminder_confirms_the_appointment(db, clinic):
    callee, appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    confirmed = await callee.says("Yes, I'll be there.")

    assert confirmed.startswith("Lovely. Confirmed the Follow-up visit")
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "confirmed"
    await callee.says("No, that's all. Bye!")
    assert callee.last.end_call
    ended = await task(db, clinic, callee)
    assert (ended.status, ended.outcome, ended.last_error) == ("done", "answered", "confirmed")


async def test_cancelling_from_a_reminder_needs_a_yes_to_the_read_back(db, clinic):
    callee, appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    asked = await callee.says("No.")
    assert asked == "No problem. Would you like to cancel it, or move it to another time?"
    read_back = await callee.says("Cancel it please.")
    assert read_back.endswith("Do you want me to cancel it?")
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "booked"
    done = await callee.says("Yes.")

    assert done.startswith("Done. Cancelled:")
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "cancelled"
    await callee.says("That's all, goodbye.")
    assert (await task(db, clinic, callee)).last_error == "cancelled"


async def test_moving_from_a_reminder_takes_the_reschedule_path(db, clinic):
    callee, appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    asked = await callee.says("Could I move it to a different day?")
    assert "What day or time" in asked
    offered = await callee.says("next week in the afternoon")
    assert offered.startswith("I have ")
    await callee.says("the first one")
    moved = await callee.says("yes")

    assert moved.startswith("All done, I've moved it.")
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "cancelled"
    (new,) = await sched.upcoming_appointments(
        db.pool, appointment.patient_id, sched.datetime.now().astimezone())
    assert new.type_name == appointment.type_name and new.starts_at != appointment.starts_at
    await callee.says("No, goodbye.")
    assert (await task(db, clinic, callee)).last_error == "rescheduled"


@pytest.mark.parametrize("words", [
    "No, I can't make that time. Could I move it to another day?",
    "I need to change it",
    "can we push it back a week",
    "can't do Tuesday, any other day?",
])
async def test_a_wish_to_move_after_the_reminder_is_a_move_not_a_cancellation(
        db, clinic, words):
    callee, appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    answer = await callee.says(words)

    assert "cancel" not in answer.lower(), answer
    assert "What day or time" in answer or answer.startswith("I have "), answer
    assert callee.engine.session.task is TaskKind.RESCHEDULE
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "booked"


@pytest.mark.parametrize("words", ["No, I can't make it. Please cancel it.", "I can't make it"])
async def test_a_cancellation_after_the_reminder_is_read_back_to_cancel(db, clinic, words):
    callee, _appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    read_back = await callee.says(words)

    assert read_back.endswith("Do you want me to cancel it?")


async def test_asked_not_to_be_called_when_the_reminder_is_read(db, clinic):
    callee, appointment = await reminder_to_margaret(db, clinic)
    await callee.says(MARGARETS_BIRTH_DATE)

    await callee.says("I'll be there, but stop calling me with these reminders.")

    assert callee.last.end_call and "won't call you again" in callee.heard[-1]
    assert (await sched.get_appointment(db.pool, appointment.id)).status == "booked"
    assert (await task(db, clinic, callee)).outcome == "opted_out"


# --- The check-in (companion) graph -----------------------------------------------------------


async def test_a_check_in_call_from_the_clinic_checks_the_person_first(db, clinic):
    await seed_check_in_line(db.pool, clinic[0])
    patient = await margaret(db, clinic)
    callee = await call_to(db, clinic, MARGARET_PHONE, kind="checkin", patient_id=patient.id,
                           reason="weekly check-in", goal="check in")
    await callee.says("Yes, speaking.")
    assert "piano" not in callee.agent_said

    opened = await callee.says(MARGARETS_BIRTH_DATE)
    assert opened == ("Thank you, Margaret. It's your check-in call from Demo Family Clinic. "
                      "How are you doing today?")
    follow_up = await callee.says("I'm doing well, thank you.")

    assert "piano recital" in follow_up


async def test_a_wrong_person_on_a_check_in_call_hears_nothing_of_earlier_calls(db, clinic):
    await seed_check_in_line(db.pool, clinic[0])
    patient = await margaret(db, clinic)
    callee = await call_to(db, clinic, MARGARET_PHONE, kind="checkin", patient_id=patient.id,
                           reason="weekly check-in", goal="check in")
    await callee.says("Yes.")
    await callee.says("June 2nd, 1950")
    await callee.says("what's this about? my piano?")

    assert callee.last.end_call
    assert not re.search(r"piano|recital|blood pressure|Chen", callee.agent_said)
    assert "piano" not in json.dumps(callee.engine.session.facts())
    assert (await task(db, clinic, callee)).outcome == "failed"


async def test_someone_ringing_the_check_in_line_is_checked_in_as_before(db, clinic):
    await seed_check_in_line(db.pool, clinic[0])

    caller = await call_from(db, clinic, MARGARET_PHONE, graph=bundled_graph("companion_checkin"))
    follow_up = await caller.says("I'm doing well, thank you.")

    assert caller.engine.session.patient is not None  # known by their number
    assert "piano recital" in follow_up
    transitions = [(t.previous_state, t.next_state)
                   for t in caller.writer.of_type("TransitionRecord")]
    assert transitions[:3] == [("remember", "who_answers"), ("who_answers", "opening"),
                               ("opening", "reminders_note")]
