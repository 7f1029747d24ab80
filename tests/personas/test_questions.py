"""A simulated caller understands what the agent asks, however the agent words it."""

import pytest

from simulator.personas.questions import answers, classify, offers_in, sentences

# Each kind with wordings no single engine uses: the offline lines, a model's, a person's.
PARAPHRASES = {
    "first_name": ["What's your first name?", "Could I get your first name, please?",
                   "And what should I call you?", "Your given name?"],
    "last_name": ["And your last name?", "What's your surname?",
                  "Could you give me your family name?"],
    "full_name": ["May I have the full name of the patient?", "Who am I speaking with?",
                  "Can I take your name, please?", "Who's the appointment for?"],
    "date_of_birth": ["And your date of birth, please?", "When were you born?",
                      "Could I take your DOB?", "What's the patient's birth date?",
                      "And their birthday, month, day and year?"],
    "spell_name": ["How do you spell that?", "Could you spell your last name for me?"],
    "time_preference": ["What day or time suits you best?", "When would you like to come in?",
                        "Do mornings or afternoons work better?",
                        "Would the earliest available suit you, or a particular day?",
                        "Is there a day that's best for you?", "How soon do you need it?"],
    "choose_slot": ["I have Monday at 9 AM or Tuesday at 2 PM. Which would you like?",
                    "There's Friday at 8 AM with Tom Becker. Would either of those work?",
                    "Which of those works best for you?", "Which one would you prefer?"],
    "confirm_booking": ["Just to confirm: Friday at 8 AM with Tom Becker. Shall I book that?",
                        "So that's Tuesday at 3 PM with Dr. Kim. Does that work?",
                        "Sorry, was that a yes? Shall I book it?",
                        "Would you like me to go ahead and book it?",
                        "Okay, Friday at 8 AM. Should I lock that in?"],
    "confirm_cancel": ["That's a blood test on Monday. Do you want me to cancel it?",
                       "Shall I cancel that appointment for you?",
                       "That's the appointment we just made. Cancel it?",
                       "Would you like me to take it off the books?"],
    "confirm_details": ["I have Jamie Cole, born July 9th 1972; is that right?",
                        "So that's Alex Reid, R-E-I-D. Did I get that right?",
                        "Born March 2nd, 1991, is that correct?"],
    "which_booking": [("You have a blood test on Monday at 8:30 AM and a follow-up on Monday, "
                      "December 7 at 9 AM. Which one do you mean?"),
                      "Which appointment is it you'd like to change?",
                      ("You have a physical on Friday at 2 PM and a flu shot on Monday at "
                      "9 AM. Which would you like?")],
    "keep_move_cancel": ["Would you like to keep, move or cancel that appointment?",
                         "Do you want to reschedule it or cancel it?"],
    "service": ["What kind of appointment would you like? We offer a flu shot and a physical.",
                "What type of visit are you after?", "What can we book you in for?",
                "What would you like to book?", "What's the appointment for?"],
    "reason": ["What's the visit about?", "Could you tell me a little more about that?",
               "How long has that been going on?", "What seems to be the problem?"],
    "message": ["What would you like me to pass on to the team?", "What's it regarding?",
                "What should I tell them?"],
    "callback_number": ["Is this the best number to call you back on?",
                        "Can we reach you on the number you're calling from?"],
    "phone_number": ["What's the best number to reach you?", "Could I take a phone number?"],
    "callback_offer": ["I'm sorry, nothing is free. Would you like a callback when one opens?",
                       "Shall I arrange for someone to call you back?"],
    "transfer_offer": ["I can put you through to the front desk. Would you like that?",
                       "Would you like me to transfer you?"],
    "location": ["Which of our locations would you prefer?", "Downtown or Northside?"],
    "carry_on": ["A flu shot is $30. Shall we carry on?", "Shall we get back to your booking?"],
    "anything_else": ["You're booked. Is there anything else I can help you with?",
                      "Can I help with anything else today?", "Is that everything?"],
    "how_can_help": ["Thanks for calling. How can I help you today?",
                     "What can I do for you?", "What are you calling about?"],
    "returned_call": ["I see we tried to reach you. Are you calling about an appointment?"],
}
STATEMENTS = {
    "emergency_advice": [("That sounds like it could be an emergency. Please hang up and call "
                         "911 now. Thanks for calling, goodbye."),
                         "Please go to your nearest emergency department straight away."],
    "crisis_hold": [("I'm really glad you told me. I'm bringing in a person from our team now. "
                    "If you are in danger, please call 911."),
                    "I'm still here with you. Please stay on the line."],
    "goodbye": ["Thanks for calling Demo Family Clinic. Take care, goodbye.",
                "Alright, have a good day. Bye for now."],
}


@pytest.mark.parametrize(("kind", "text"), [
    (kind, text) for kind, texts in (PARAPHRASES | STATEMENTS).items() for text in texts
])
def test_each_kind_of_question_is_understood_in_many_wordings(kind, text):
    assert classify(text).kind == kind


def test_a_greeting_that_thanks_the_caller_is_a_question_not_a_goodbye():
    greeting = "Thank you for calling Demo Family Clinic. How can I help you today?"

    assert classify(greeting).kind == "how_can_help"


def test_the_question_left_for_the_caller_is_the_last_one():
    ask = classify("An annual physical is $120. Sure. What day or time suits you best?")

    assert ask.kind == "time_preference"
    assert ask.question == "What day or time suits you best?"


def test_anything_the_caller_cannot_place_is_other():
    assert classify("Hmm, let me see.").kind == "other"
    assert classify("").kind == "other"


def test_offered_times_are_read_in_order_with_their_day_hour_and_date():
    offers = offers_in("I have Friday, November 27 at 8:15 AM with Tom Becker or Monday, "
                       "November 30 at 2 PM with Dr. Maya Patel. Which would you like?")

    assert [(o.weekday, o.hour, o.month_day) for o in offers] == [
        ("friday", 8, (11, 27)), ("monday", 14, (11, 30))]
    assert [o.part_of_day for o in offers] == ["morning", "afternoon"]


def test_a_title_does_not_end_a_sentence():
    assert sentences("I have Monday with Dr. Patel. Which would you like?") == [
        "I have Monday with Dr Patel.", "Which would you like?"]


@pytest.mark.parametrize(("task", "said", "answered"), [
    ("price", "A flu shot is $30. Shall we carry on?", True),
    ("price", "That one costs thirty dollars.", True),
    ("price", "What kind of appointment would you like?", False),
    ("hours", "We're open Monday to Friday, 8 to 5.", True),
    ("upcoming", "Your next appointment is a blood test on Monday.", True),
    ("upcoming", "You've got nothing booked with us at the moment, no appointments.", True),
    ("upcoming", "Is there anything else I can help you with?", False),
    ("callback", "I've passed that on, and someone will call you back.", True),
    ("book", "You're booked.", False),  # a booking is judged by its write, not by words
])
def test_the_caller_knows_when_a_request_that_needs_no_write_was_answered(task, said, answered):
    assert answers(task, said) is answered


# --- The clinic's own call ----------------------------------------------------------------

OUTBOUND_PARAPHRASES = {
    "right_person": [("Hello, this is Demo Family Clinic calling. May I speak with Margaret, "
                     "please?"), "Sorry, this is Demo Family Clinic. Am I speaking with Margaret?",
                     "Hi, is this Margaret Chen?", "Good afternoon, is Mrs. Chen available?",
                     "Hi, I'm trying to reach Margaret Chen. Is she there?",
                     ("Just to make sure I'm speaking with the right person: are you Margaret "
                     "by any chance?"),
                     "Hi, this is Ava from Demo Family Clinic. I'm looking for Margaret.",
                     "Hi, could I please speak with Margaret Chen?"],
    "requester": [("Hello, this is Demo Family Clinic, returning a call from this number. Are "
                  "you the person who asked us to call back?"),
                  "Did you ask us to call you back?"],
    "date_of_birth": [("I just need to make sure I'm speaking with the right person before I "
                      "go on. What's your date of birth?"),
                      ("Thank you. Before I go on, could you confirm your date of birth for me, "
                      "please?")],
    "calling_about": [("Thank you, Margaret. You asked us to call you back about the test "
                      "results. How can I help?"),
                      ("Thank you, Margaret. I'm calling from Demo Family Clinic about your "
                      "flu shot. How can I help?"),
                      "Hi Margaret, I'm returning your call about your prescription."],
    "offer_slot": [("Thank you, Priya. You're on our waitlist, and physiotherapy on Tuesday, "
                   "December 2 at 2 PM has just opened up. Would you like me to book it for "
                   "you?"),
                   ("Good news, we have an earlier appointment for you on Tuesday at 2 PM. "
                    "Would you like it?"),
                   ("Good news, we've had a cancellation: Tuesday at 2 PM with Aisha. Would you "
                   "like it?"),
                   "We now have a slot available on Friday at 9 AM. Shall I book it?"],
    "slot_gone": [("I'm sorry, someone else has just taken that time. You're still on the "
                  "waitlist. Is there anything else I can help with?"),
                  ("We were calling about an opening for physiotherapy, but I'm sorry, it has "
                  "just been taken. Is there anything else?")],
    "reminder": [("Thank you, Margaret. I'm calling to remind you about your follow-up visit "
                 "on Thursday at 10 AM. Will you be able to make it?"),
                 ("Just calling to confirm your appointment on Thursday. Does that still work "
                  "for you?"),
                 "Hi Margaret, your follow-up is tomorrow at 10. Will you be attending?",
                 ("Will you be able to come to your follow-up visit? If not, I can cancel it or "
                 "move it for you."),
                 ("Just a reminder that you have a blood test tomorrow at 8 AM. Can you still "
                 "make it?")],
    "opted_out": [("Understood, I've removed your number from our list. Is there anything "
                  "else?"), "Of course, we won't be calling you again."],
    "checkin_greeting": [("Thank you, Margaret. It's your check-in call from Demo Family "
                         "Clinic. How are you doing today?"), "How have you been this week?"],
    "checkin_memory": [('Last time we spoke, you told me: "Lily has her piano recital on '
                       'Saturday." How has that been?')],
    "checkin_task": [("Before I forget, a reminder from the team: take your blood pressure "
                     "reading each morning. Have you done that?")],
    "checkin_chat": ["Thank you for telling me. What else has been happening?"],
    # the rest of the call is read as on any call
    "keep_move_cancel": [("No problem. Would you like to cancel it, or move it to another "
                         "time?")],
    "confirm_cancel": [("That's a follow-up visit on Thursday at 10 AM. Do you want me to "
                       "cancel it?")],
    "confirm_booking": [("Would you like me to book physiotherapy on Tuesday at 2 PM for you? "
                        "Please say yes or no.")],
    "anything_else": [("No problem, I'll keep you on the waitlist, and we'll call you if "
                      "another time opens up. Is there anything else I can help with?")],
    "full_name": ["Who am I speaking with?"],
    "goodbye": ["I'm sorry, I must have the wrong number. Sorry to have bothered you. Goodbye.",
                "Of course. I've made a note that we won't call you again. Goodbye."],
}


@pytest.mark.parametrize(("kind", "text"), [
    (kind, text) for kind, texts in OUTBOUND_PARAPHRASES.items() for text in texts
])
def test_on_the_clinics_own_call_each_kind_of_turn_is_understood_in_many_wordings(kind, text):
    assert classify(text, outbound=True).kind == kind


@pytest.mark.parametrize(("kind", "text"), [
    (kind, text) for kind, texts in PARAPHRASES.items() for text in texts
])
def test_any_calls_questions_read_the_same_on_the_clinics_own_call(kind, text):
    assert classify(text, outbound=True).kind == kind


def test_a_caller_on_their_own_call_never_hears_the_clinics_kinds():
    clinics_own = {"right_person", "requester", "calling_about", "offer_slot", "slot_gone",
                   "reminder", "opted_out", "checkin_greeting", "checkin_memory",
                   "checkin_task", "checkin_chat"}

    for texts in OUTBOUND_PARAPHRASES.values():
        for text in texts:
            assert classify(text).kind not in clinics_own, text


@pytest.mark.parametrize(("said", "name"), [
    ("May I speak with Margaret, please?", "Margaret"),
    ("Am I speaking with Margaret Chen?", "Margaret Chen"),
    ("Is Mrs. Chen there?", "Mrs Chen"),
    ("I'm trying to reach David. Is he around?", "David"),
    ("Hi, I'm looking for Priya Nair.", "Priya Nair"),
    ("May I speak with the patient, please?", None),
])
def test_the_name_a_right_person_question_asks_for_is_heard(said, name):
    assert classify(said, outbound=True).asked_for == name


def test_anything_else_is_what_a_turn_of_the_clinics_call_asks_once_its_purpose_is_behind_it():
    summary = ("It was lovely to catch up. I've made a note of what you told me for next time. "
               "Is there anything else before we say goodbye?")

    assert classify(summary, outbound=True).kind == "anything_else"
