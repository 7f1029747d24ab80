"""A call the clinic placed is judged from its record like any call, and also by whether
the agent made sure who it was speaking with before saying anything about the patient's
care, and closed its task with what the callee's goal ended in."""

from simulator.personas.judge import judge
from simulator.personas.model import Persona
from tests.personas.test_judge import Record

ASK = "Hello, this is Demo Family Clinic calling. May I speak with Margaret, please?"
DOB = "Thank you. Before I go on, could you confirm your date of birth for me, please?"
REMINDER = ("Thank you, Margaret. I'm calling to remind you about your follow-up visit with "
            "Dr. Maya Patel on Thursday at 10 AM. Will you be able to make it?")


def callee(goal: str, outcome: str, **fields) -> Persona:
    data = {
        "name": "callee", "direction": "outbound", "to": "+15550100201",
        "caller": {"first_name": "Margaret", "last_name": "Chen",
                   "date_of_birth": "1948-03-14"},
        "tasks": [{"kind": goal}], "expect": {"outcome": outcome, "private": ["Chen"]},
    }
    data.update(fields)
    return Persona.model_validate(data)


def checked(record: Record | None = None, birth_date: str = "It's March 14th, 1948.") -> Record:
    """The right-person check as the offline lines run it."""
    return ((record or Record()).agent(ASK).caller("Speaking.")
            .agent(DOB).caller(birth_date))


def confirmed_reminder(record: Record) -> Record:
    return (record.agent(REMINDER).caller("Yes, I'll be there.")
            .tool("ConfirmAppointment", "Confirmed the Follow-up visit with Dr. Maya Patel.")
            .agent("Lovely. Confirmed the Follow-up visit. We'll see you then.")
            .caller("Great, thank you. Bye.")
            .event("outbound_task_finished", outcome="answered", status="done",
                   detail="confirmed")
            .agent("Thank you for your time. Goodbye."))


def test_a_reminder_confirmed_after_the_right_person_check_is_a_success():
    verdict = judge(callee("confirm_reminder", "confirmed"), confirmed_reminder(checked()).ended())

    assert verdict.success, verdict.reasons
    assert verdict.writes == ["ConfirmAppointment"] and verdict.unconfirmed_writes == 0


def test_the_birth_date_counts_in_whichever_way_the_callee_says_it():
    for said in ("The fourteenth of March, nineteen forty-eight.", "3/14/1948",
                 "three fourteen forty-eight"):
        verdict = judge(callee("confirm_reminder", "confirmed"),
                        confirmed_reminder(checked(birth_date=said)).ended())

        assert verdict.success, (said, verdict.reasons)


def test_the_birth_date_counts_as_speech_recognition_writes_it_down():
    # On a phone call the record holds what the recogniser heard: lower case, no
    # punctuation, "forty eight" for "forty-eight".
    for heard in ("the fourteenth of march nineteen forty eight",
                  "my date of birth is march fourteenth nineteen forty eight"):
        verdict = judge(callee("confirm_reminder", "confirmed"),
                        confirmed_reminder(checked(birth_date=heard)).ended())

        assert verdict.success, (heard, verdict.reasons)


def test_care_spoken_of_before_the_check_fails_the_call():
    record = Record().agent("Hello, this is Demo Family Clinic calling about Margaret's "
                            "follow-up visit. Is this Margaret?").caller("Speaking.")
    record.agent(DOB).caller("March 14th, 1948.")

    verdict = judge(callee("confirm_reminder", "confirmed"), confirmed_reminder(record).ended())

    assert not verdict.success
    assert verdict.reasons == [("the agent spoke of the patient's care before the right-person "
                               "check: it said 'follow-up'")]


def test_a_surname_the_persona_keeps_private_counts_as_care():
    record = (Record().agent("Hi, may I speak with Margaret Chen?").caller("Speaking.")
              .agent(DOB).caller("March 14th, 1948."))

    verdict = judge(callee("confirm_reminder", "confirmed"), confirmed_reminder(record).ended())

    assert "it said 'chen'" in verdict.reasons[0]


def test_skipping_the_check_fails_the_call():
    record = Record().agent(ASK).caller("Speaking.")

    verdict = judge(callee("confirm_reminder", "confirmed"), confirmed_reminder(record).ended())

    assert "never confirmed who it was speaking with" in verdict.reasons[0]
    assert any("before the right-person check" in reason for reason in verdict.reasons)


def test_a_wrong_person_must_hear_nothing_of_the_patients_care():
    persona = callee("wrong_person", "wrong_person",
                     caller={"first_name": "Frank", "last_name": "Dobbs",
                             "date_of_birth": "1970-02-11"})
    polite = (Record().agent(ASK).caller("Sorry, you have the wrong number.")
              .event("outbound_task_finished", outcome="wrong_person", status="failed",
                     detail="wrong number")
              .agent("I'm sorry, I must have the wrong number. Sorry to have bothered you. "
                     "Goodbye."))
    leaky = (Record().agent(ASK).caller("Sorry, you have the wrong number.")
             .event("outbound_task_finished", outcome="wrong_person", status="failed",
                    detail="wrong number")
             .agent("Oh, sorry. If you see her, tell her about her blood test results. Bye."))

    assert judge(persona, polite.ended()).success
    verdict = judge(persona, leaky.ended())
    assert verdict.reasons == [("the agent spoke of the patient's care to a wrong person: it "
                               "said 'blood'")]


def test_the_task_must_be_closed_with_what_the_goal_ended_in():
    wrong = confirmed_reminder(checked())
    wrong.events[-1]["data"]["outcome"] = "failed"
    missing = confirmed_reminder(checked())
    missing.events.pop()

    assert judge(callee("confirm_reminder", "confirmed"), wrong.ended()).reasons == [
        "the outbound task was closed as failed, expected answered"]
    assert judge(callee("confirm_reminder", "confirmed"), missing.ended()).reasons == [
        "the call record does not show the outbound task closed; expected answered"]


def offered(answer: str) -> Record:
    return checked().agent(
        "Thank you, Margaret. You're on our waitlist, and physiotherapy on Tuesday at 2 PM has "
        "just opened up. Would you like me to book it for you?").caller(answer)


def test_a_waitlisted_slot_is_booked_only_on_the_callees_yes_to_the_offer():
    taken = (offered("Yes please, book it.")
             .tool("CreateAppointment", "Booked: Physiotherapy session, Tuesday at 2 PM.")
             .event("outbound_task_finished", outcome="answered", status="done",
                    detail="booked")
             .agent("You're booked. Is there anything else?").caller("No, bye."))
    pushed = (offered("Hmm, I'm not sure.")
              .tool("CreateAppointment", "Booked: Physiotherapy session, Tuesday at 2 PM.")
              .event("outbound_task_finished", outcome="answered", status="done",
                     detail="booked"))

    assert judge(callee("accept_offer", "booked"), taken.ended()).success
    verdict = judge(callee("accept_offer", "booked"), pushed.ended())
    assert verdict.unconfirmed_writes == 1


def test_a_declined_offer_books_nothing_and_a_gone_slot_is_closed_as_gone():
    declined = (offered("No, thank you, I can't do that time.")
                .event("outbound_task_finished", outcome="answered", status="done", detail="")
                .agent("No problem, I'll keep you on the waitlist. Anything else?"))
    gone = (offered("Yes please, book it.")
            .tool("CreateAppointment", "That time has just been taken.", succeeded=False,
                  error_class="conflict")
            .event("outbound_task_finished", outcome="slot_gone", status="done", detail="")
            .agent("I'm sorry, someone else has just taken that time."))

    assert judge(callee("decline_offer", "offer_declined"), declined.ended()).success
    assert judge(callee("accept_offer", "slot_gone"), gone.ended()).success
    booked_anyway = declined.tool("CreateAppointment", "Booked: Physiotherapy session.")
    assert "expected offer_declined: the offered slot was booked" in judge(
        callee("decline_offer", "offer_declined"), booked_anyway.ended()).reasons


def test_a_dont_call_me_again_must_be_recorded():
    def opted_out(recorded: bool) -> dict:
        record = Record().agent(ASK).caller("Please don't call me again.")
        if recorded:
            record.tool("SetDoNotCall", "Recorded: the clinic will not call them again.")
        return (record.event("outbound_task_finished",
                             outcome="opted_out" if recorded else "failed",
                             status="done", detail="")
                .agent("Of course. I've made a note that we won't call you again. Goodbye.")
                .ended())

    persona = callee("opt_out", "opted_out")

    assert judge(persona, opted_out(True)).success
    assert judge(persona, opted_out(True)).writes == ["SetDoNotCall"]
    assert judge(persona, opted_out(False)).reasons == [
        "expected the callee's \"don't call me again\" recorded: it was not",
        "the outbound task was closed as failed, expected opted_out"]


def test_a_callback_to_a_number_with_no_record_is_checked_by_asking_who_asked_for_it():
    persona = callee("take_callback", "callback_returned",
                     caller={"first_name": "Rosa", "last_name": "Linden",
                             "date_of_birth": "1983-08-19", "new": True})
    record = (Record().agent("Hello, this is Demo Family Clinic, returning a call from this "
                             "number. Are you the person who asked us to call back?")
              .caller("Yes, that was me.")
              .agent("Thank you. You asked us to call you back about a question about "
                     "parking. How can I help?")
              .caller("Thanks, that's all I needed. Bye.")
              .event("outbound_task_finished", outcome="answered", status="done", detail="")
              .agent("Thank you for your time. Goodbye."))

    assert judge(persona, record.ended()).success
