"""Whole booking calls against the demo clinic: what the caller hears, and what the database holds.

No LLM: the deterministic navigator, the real tools over the embedded database, and
the spoken lines of prompts/actions.yaml. Each test asserts the database afterwards:
the appointment at the confirmed slot, or nothing written.
"""

import uuid
from datetime import date

import pytest

from db import scheduling as sched
from tests.flows.callers import DAVID_PHONE, FAMILY_PHONE, PRIYA_PHONE, call_from


async def live_bookings(db, patient_id: str) -> list[sched.Appointment]:
    return await sched.upcoming_appointments(db.pool, patient_id, sched.datetime.now().astimezone())


async def patient(db, clinic, phone: str, first: str | None = None) -> sched.Patient:
    found = await sched.patients_by_phone(db.pool, clinic[0], phone)
    return next(p for p in found if first in (None, p.first_name))


async def test_an_existing_patient_books_the_slot_they_confirmed(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    assert "What day or time" in await caller.says("Hi, I'd like to book a physio appointment")
    offer = await caller.says("next week in the morning please")
    assert offer.startswith("I have ") and "Which would you like?" in offer
    picked = await caller.says("the second one")
    assert picked.startswith("Just to confirm:") and picked.endswith("Shall I book that?")
    chosen = caller.engine.session.offered[caller.engine.session.picked_slot]
    assert await live_bookings(db, (await patient(db, clinic, PRIYA_PHONE)).id) == []

    booked = await caller.says("yes please")
    assert booked.startswith("You're booked.") and "anything else" in booked
    (appointment,) = await live_bookings(db, (await patient(db, clinic, PRIYA_PHONE)).id)
    assert appointment.starts_at == chosen.starts_at
    assert appointment.practitioner_name == chosen.practitioner_name
    transitions = caller.writer.of_type("TransitionRecord")
    assert ("awaiting_final_confirmation", "post_booking_closing", "booked") in [
        (t.previous_state, t.next_state, t.reason) for t in transitions
    ]
    assert [t.error_class for t in caller.tool_calls("CreateAppointment")] == [None]


@pytest.mark.parametrize("nothing_else", ["No.", "nah", "No thanks.", "No, that's it."])
async def test_a_plain_no_after_booking_says_goodbye_and_ends_the_call(db, clinic, nothing_else):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("Hi, I'd like to book a physio appointment")
    await caller.says("next week in the morning please")
    await caller.says("the first one")
    assert (await caller.says("yes please")).startswith("You're booked.")

    bye = await caller.says(nothing_else)

    assert "goodbye" in bye.lower() and caller.last.end_call, bye


@pytest.mark.parametrize("more", ["No, but can I also book a flu shot?",
                                  "Nope, actually I need to cancel my other appointment."])
async def test_a_no_that_asks_for_more_after_booking_carries_on(db, clinic, more):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("Hi, I'd like to book a physio appointment")
    await caller.says("next week in the morning please")
    await caller.says("the first one")
    await caller.says("yes please")

    heard = await caller.says(more)

    assert "Goodbye" not in heard and not caller.last.end_call, heard


async def test_changing_their_mind_at_the_final_confirmation_writes_nothing(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("can I book an annual physical")
    await caller.says("tomorrow afternoon or whenever")
    await caller.says("the first one")
    again = await caller.says("no, actually not that one")
    assert again.startswith("I have ")  # the times already found, read out again
    assert await live_bookings(db, (await patient(db, clinic, PRIYA_PHONE)).id) == []
    assert caller.tool_calls("CreateAppointment") == []


async def test_a_new_caller_is_registered_then_books(db, clinic):
    caller = await call_from(db, clinic, "+15550100299")
    assert "first name" in await caller.says("Hello, I need a flu shot")
    await caller.says("Sam")
    await caller.says("Okafor-Nair")
    read_back = await caller.says("February third nineteen ninety")
    assert read_back == "I have Sam Okafor-Nair, born February 3, 1990. Is that right?"
    assert caller.tool_calls("CreatePatient") == []  # nothing written before the yes
    registered = await caller.says("yes, that's me")
    assert "you're all set up" in registered and "What day or time" in registered
    sam = (await sched.find_patients(db.pool, clinic[0], first_name="Sam"))[0]
    assert (sam.last_name, sam.date_of_birth) == ("Okafor-Nair", date(1990, 2, 3))
    assert sam.phone == "+15550100299"
    await caller.says("whenever is soonest")
    await caller.says("the first one")
    await caller.says("yes")
    assert len(await live_bookings(db, sam.id)) == 1


async def test_a_caller_who_front_loads_their_details_is_read_back_not_asked(db, clinic):
    caller = await call_from(db, clinic, "+15550100298")
    read_back = await caller.says(
        "Hiya, it's Morag Fleming here, date of birth the second of March "
        "nineteen sixty one, could I get a flu jab next Friday morning?")
    assert read_back == "I have Morag Fleming, born March 2, 1961. Is that right?"

    booked_time = await caller.says("that's me, yes")

    assert "you're all set up" in booked_time and booked_time.count("?") == 1
    assert "I have " in booked_time  # straight to the times on the day they asked for
    offered = [caller.engine.session.offered[r] for r in caller.engine.session.last_offer]
    assert {s.starts_at.weekday() for s in offered} == {4}
    assert all(s.starts_at.hour < 12 for s in offered)


async def test_a_spelled_correction_of_the_last_name_is_what_gets_registered(db, clinic):
    caller = await call_from(db, clinic, "+15550100297")
    await caller.says("I'd like to register and book a physical")
    await caller.says("Alex")
    await caller.says("Reed")
    asked = await caller.says("sorry no, it's Reid, R-E-I-D")
    assert asked == "And your date of birth, please?"
    await caller.says("four eleven eighty")
    read_back = await caller.says("nope")
    assert "What should I change" in read_back
    assert (await caller.says("the year is nineteen eighty one")).startswith(
        "I have Alex Reid, born April 11, 1981")
    await caller.says("yes")
    alex = (await sched.find_patients(db.pool, clinic[0], first_name="Alex",
                                      last_name="Reid"))[0]
    assert alex.date_of_birth == date(1981, 4, 11)


async def test_cancel_one_of_several_after_an_explicit_yes(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    david = await patient(db, clinic, DAVID_PHONE)
    first, second = await live_bookings(db, david.id)
    asked = await caller.says("I need to cancel an appointment")
    assert "Which one do you mean?" in asked
    assert "Do you want me to cancel it?" in await caller.says("the second one")
    done = await caller.says("yes please")
    assert done.startswith("Done. Cancelled:")
    assert [a.id for a in await live_bookings(db, david.id)] == [first.id]


async def test_cancel_everything(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    assert "cancel all of them" in await caller.says("please cancel all my appointments")
    await caller.says("yes")
    assert await live_bookings(db, (await patient(db, clinic, DAVID_PHONE)).id) == []


async def test_what_do_i_have_coming_up(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    answer = await caller.says("what do I have coming up?")
    assert answer.startswith("You have a blood test with Tom Becker on")
    assert "follow-up visit with Dr. James Okafor" in answer


async def test_a_price_question_mid_booking_then_the_booking_goes_on(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("I'd like to book physio")
    await caller.says("next week")
    prices = await caller.says("how much does it cost?")
    assert prices == "A physiotherapy session is $110. Shall we carry on?"
    assert (await caller.says("okay the first one")).startswith("Just to confirm:")


async def test_a_shared_phone_caller_is_identified_then_moves_their_booking(db, clinic):
    caller = await call_from(db, clinic, FAMILY_PHONE)
    elena = await patient(db, clinic, FAMILY_PHONE, "Elena")
    (old,) = await live_bookings(db, elena.id)
    assert "full name" in await caller.says("I want to reschedule my appointment")
    assert "date of birth" in await caller.says("Elena Alvarez")
    asked = await caller.says("November twentieth nineteen seventy eight")
    assert caller.engine.session.patient.id == elena.id
    assert asked == "Sure, a physiotherapy session. What day or time suits you best?"
    assert (await caller.says("as soon as possible")).startswith("I have ")
    await caller.says("the first one")
    moved = await caller.says("yes")
    assert moved.startswith("All done, I've moved it.")
    (new,) = await live_bookings(db, elena.id)
    assert new.id != old.id and new.type_name == old.type_name
    previous = await sched.get_appointment(db.pool, old.id)
    assert previous.status == "cancelled"


async def test_an_emergency_is_redirected_and_flagged_urgently(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    said = await caller.says("I have chest pain and I can't breathe")
    assert "call 911" in said
    request = await db.pool.fetchrow(
        "SELECT urgent, reason FROM callback_requests WHERE call_id = $1",
        uuid.UUID(caller.engine.session.call_id),
    )
    assert request["urgent"] and request["reason"] == "possible emergency"


@pytest.mark.parametrize(
    ("before", "symptom"),
    [
        ([], "Can I get in with someone today, there's a weight on my chest and my left arm "
             "feels funny"),
        (["I'd like to book a physio appointment"], "sorry, one side of my face has gone droopy"),
        (["I'd like to book a physio appointment", "next week please"],
         "it's the worst headache I've had in my life, it just came on"),
        (["I'd like to book a physio appointment", "next week in the morning", "the first one"],
         "yes but I'm really struggling to get my breath"),
    ],
)
async def test_a_red_flag_in_everyday_words_is_redirected_in_any_state(db, clinic, before,
                                                                       symptom):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    for line in before:
        await caller.says(line)

    said = await caller.says(symptom)

    assert said.startswith("That sounds like it could be an emergency") and "call 911" in said
    assert caller.tool_calls("CreateAppointment") == []
    assert [t.input.get("urgent") for t in caller.tool_calls("EscalateToHuman")] == [True]


async def test_goodbye_ends_the_call(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    said = await caller.says("no that's all, goodbye")
    assert said.startswith("Thanks for calling Demo Family Clinic") and caller.last.end_call


async def test_a_transfer_goes_to_the_clinics_own_number_once_said(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    asked = await caller.says("Can you put me through to the front desk?")
    assert "Would you like that?" in asked and caller.last.transfer_to is None
    said = await caller.says("Yes please.")
    # the last thing a caller being put through hears is that, not a goodbye
    assert said == "Putting you through now."
    assert caller.last.end_call
    assert caller.last.transfer_to == "+15550100110"  # Downtown's number in the clinic data


async def test_the_same_question_is_rephrased_then_a_person_is_offered(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    first = await caller.says("I'd like to book a physio")
    assert first.endswith("What day or time suits you best?")

    second = await caller.says("ooh, I couldn't say")
    third = await caller.says("it's hard to know really")

    assert second == "Would you like the earliest available time, or a particular day?"
    assert "call you back, or to speak to a person?" in third
    transitions = [(t.next_state, t.reason) for t in caller.writer.of_type("TransitionRecord")]
    assert ("handoff_prep", "stuck") in transitions


async def test_offered_help_is_not_taken_without_a_yes(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    for line in ("I'd like to book a physio", "hmm", "er, not sure"):
        await caller.says(line)
    back = await caller.says("I don't know, let's keep trying")
    assert back.endswith("What day or time suits you best?")
    assert caller.tool_calls("EscalateToHuman") == []


async def test_a_birth_date_not_understood_is_asked_again_with_help(db, clinic):
    caller = await call_from(db, clinic, "+15550100296")
    await caller.says("new patient, my name is Iris Vance, I need a blood test")
    again = await caller.says("oh gosh, let me think")
    assert again == ("Sorry, I didn't catch that. What's your date of birth: the month, "
                     "the day, then the year?")
    read_back = await caller.says("three, twenty-one, forty-four")
    assert read_back == "I have Iris Vance, born March 21, 1944. Is that right?"


async def callback_request(db, call_id: str):
    return await db.pool.fetchrow(
        "SELECT reason, message, phone, urgent FROM callback_requests WHERE call_id = $1",
        uuid.UUID(call_id))


async def test_a_callback_asks_what_to_pass_on_and_which_number_then_confirms_it(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("could somebody ring me back later today")
    await caller.says("it's about the bill I got in the post")
    number = await caller.says("not this one, try my mobile, three one two five five five "
                               "zero one nine nine")
    assert number == "Thanks. That's 3 1 2, 5 5 5, 0 1 9 9. Is that right?"
    assert caller.tool_calls("EscalateToHuman") == []  # nothing logged before the yes
    await caller.says("yes that's it")
    request = await callback_request(db, caller.engine.session.call_id)
    assert request["phone"] == "+13125550199" and "bill" in request["message"]


async def test_a_vague_request_asks_what_the_visit_is_for_then_how_long(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    assert await caller.says("I need to see somebody") == "What's the visit about?"
    assert await caller.says("I've been feeling dizzy on and off") == (
        "How long has that been going on?")
    listed = await caller.says("a couple of weeks now")
    assert listed.startswith("What kind of appointment would you like? We offer")
    assert caller.engine.session.visit_reason == "I've been feeling dizzy on and off"


async def test_a_tentative_request_is_captured_and_followed_up(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    asked = await caller.says("I might need to come in at some point, I'm not sure yet")
    assert asked == "I can help with that. What kind of appointment do you need?"


async def test_a_returned_call_is_clarified(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    asked = await caller.says("hello, I've got a missed call from this number")
    assert asked == "I see we tried to reach you. Are you calling about an appointment?"
    assert (await caller.says("yes I think so")).startswith("You have ")


async def test_a_returned_sales_call_books_a_sales_callback_after_a_yes(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    asked = await caller.says("hi, you left me a message about a discount package")
    assert asked == "Are you returning our call about our services?"
    await caller.says("yes that's right")
    request = await callback_request(db, caller.engine.session.call_id)
    assert request["reason"] == "returning a call about the clinic's services"


async def test_asking_for_another_location_lists_them(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("can I book a physio")
    asked = await caller.says("is there a different location, somewhere closer to me?")
    assert asked == "Which of our locations would you prefer: Downtown or Northside?"
    offer = await caller.says("Northside please, next week")
    offered = [caller.engine.session.offered[r] for r in caller.engine.session.last_offer]
    assert offer.startswith("I have ") and {s.location_name for s in offered} == {"Northside"}


async def test_confirming_an_existing_booking_marks_it_only_after_a_yes(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    await caller.says("hiya, just ringing to confirm my appointment")
    read_back = await caller.says("the blood test")
    assert read_back.startswith("That's a blood test") and "mark it as confirmed" in read_back
    assert caller.tool_calls("ConfirmAppointment") == []
    done = await caller.says("yes please")
    assert done.startswith("Lovely.") and [t.error_class for t in
                                          caller.tool_calls("ConfirmAppointment")] == [None]


async def test_cancelling_the_booking_just_made_reads_it_back_as_that(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    for line in ("book me a flu jab", "whenever", "the first one", "yes"):
        await caller.says(line)
    asked = await caller.says("oh hang on, actually can you cancel the one you just made")
    assert asked.startswith("That's the appointment we just made")
    await caller.says("yes")
    assert await live_bookings(db, (await patient(db, clinic, PRIYA_PHONE)).id) == []


async def test_two_requests_in_one_breath_are_handled_in_order(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    first = await caller.says("can you take Monday's blood test off, then get me in for a flu "
                              "jab on Friday")
    assert first.startswith("That's a blood test") and first.endswith("cancel it?")
    second = await caller.says("yes please")
    assert second.startswith("Done. Cancelled: Blood test") and "I have Friday" in second
    assert "anything else" not in second


async def test_a_name_corrected_after_registration_is_corrected_on_the_record(db, clinic):
    caller = await call_from(db, clinic, "+15550100294")
    await caller.says("hello, my name's Kit Marlowe, date of birth 4/2/1988, need a flu jab")
    await caller.says("yes that's right")
    asked = await caller.says("oh, hang on, my last name is spelled M-A-R-L-O-W-E-S")
    assert asked == ("Sorry about that. I'll correct it to Kit Marlowes, born April 2, 1988. "
                     "Is that right?")
    corrected = await caller.says("yes")
    assert corrected.startswith("Done, I've corrected that.")
    [kit] = await sched.find_patients(db.pool, clinic[0], first_name="Kit")
    assert kit.last_name == "Marlowes"
    event = await db.pool.fetchrow(
        "SELECT payload FROM clinical_events WHERE call_id = $1 AND type = "
        "'registration_corrected'", uuid.UUID(caller.engine.session.call_id))
    assert event["payload"]["previous"] == {"last_name": "Marlowe"}


async def test_a_patient_calling_from_another_number_is_found_by_name_and_birth_date(db, clinic):
    caller = await call_from(db, clinic, "+15550100293")
    asked = await caller.says("hi, what have I got booked in at the moment?")
    assert "full name" in asked
    await caller.says("David Okonkwo")
    found = await caller.says("the twenty fifth of January, 1990")
    assert found.startswith("Thank you, David, I've found your record. You have a blood test")


async def test_no_record_under_that_name_offers_a_callback_without_writing_anything(db, clinic):
    caller = await call_from(db, clinic, "+15550100292")
    await caller.says("I need to cancel my appointment")
    await caller.says("it's Dana Whitfield")
    missing = await caller.says("May 5th 1970")
    assert missing.startswith("I'm sorry, I can't find a record for Dana Whitfield")
    assert caller.tool_calls("CancelAppt") == [] and caller.tool_calls("EscalateToHuman") == []


async def test_changing_the_time_at_the_read_back_searches_again_and_writes_nothing(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("could I book a physio for next Tuesday")
    await caller.says("the first one")
    again = await caller.says("ooh, sorry, can we do later in the day, the afternoon")
    offered = [caller.engine.session.offered[r] for r in caller.engine.session.last_offer]
    assert again.startswith("I have ") and all(s.starts_at.hour >= 12 for s in offered)
    assert caller.tool_calls("CreateAppointment") == []


async def test_a_caller_in_crisis_is_never_hung_up_on(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    first = await caller.says("honestly I'm only ringing to say goodbye, I'm going to end it all")
    assert "staying right here on the line with you" in first and "call 911" in first
    assert not caller.last.end_call
    for line in ("I don't know what to say", "bye then", "goodbye"):
        said = await caller.says(line)
        assert not caller.last.end_call and "goodbye" not in said.lower()
    [request] = caller.tool_calls("EscalateToHuman")
    assert request.input["urgent"] and request.input["reason"] == "caller in crisis"


async def test_two_different_visits_in_one_breath_are_booked_one_after_the_other(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    first = await caller.says("can I get a flu jab whenever's soonest and then a blood test "
                              "too, any time")
    await caller.says("the first one")
    read_back = caller.heard[-1]
    assert read_back.startswith("Just to confirm: a flu shot on")
    second = await caller.says("yes")
    assert "You're booked. Booked: Flu shot" in second and "I have " in second
    assert first.startswith("I have ")
    await caller.says("first one")
    assert caller.heard[-1].startswith("Just to confirm: a blood test on")


async def test_the_other_slot_at_the_read_back_is_read_back_instead(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("I'd like a physio next week please")
    await caller.says("the first one")
    other = await caller.says("ah no, not that one, the second one please")
    chosen = caller.engine.session.offered[caller.engine.session.picked_slot]
    assert other.startswith("Just to confirm:") and caller.engine.session.confirmation is None
    assert chosen.key == caller.engine.session.offered[
        caller.engine.session.last_offer[1]].key
    assert caller.tool_calls("CreateAppointment") == []


async def test_asking_what_is_booked_then_to_cancel_one_is_answered_then_read_back(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    said = await caller.says("could you tell me when my next appointment is, and then cancel "
                             "the follow-up")
    assert said.startswith("You have a blood test") and said.endswith("Do you want me to "
                                                                      "cancel it?")
    assert "That's a follow-up visit" in said


async def test_a_long_answer_to_the_name_question_keeps_only_the_name(db, clinic):
    caller = await call_from(db, clinic, "+15550100291")
    await caller.says("hello dear, I need a check-up")
    await caller.says("oh, let me think now. It's Winifred, love. Winifred Ash.")
    assert caller.engine.session.new_patient.first_name == "Winifred"
    assert caller.engine.session.new_patient.last_name == "Ash"


async def test_asking_to_find_another_time_is_a_reschedule_not_a_cancellation(db, clinic):
    caller = await call_from(db, clinic, DAVID_PHONE)
    said = await caller.says("I can't do my blood test on Monday now, could you find me "
                             "another day?")
    assert "cancel" not in said.lower() and caller.engine.session.task.value == "reschedule"


async def test_saying_the_day_again_when_every_time_offered_is_on_it_reads_the_first_back(db,
                                                                                         clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    offer = await caller.says("a flu jab on Friday please")
    offered = [caller.engine.session.offered[r] for r in caller.engine.session.last_offer]
    assert offer.startswith("I have ") and {s.starts_at.weekday() for s in offered} == {4}
    read_back = await caller.says("like I said, Friday's what I'm after")
    assert read_back.startswith("Just to confirm: a flu shot on Friday")
    assert caller.tool_calls("CreateAppointment") == []
