"""A persona answers the clinic's own call: it says whether it is the person asked for,
gives its date of birth when asked, hears why the clinic called and does what its goal
says, however the agent words each of those."""

from datetime import date

import pytest

from simulator.outbound_callee import parse_callee
from simulator.personas.caller import RuleCaller
from simulator.personas.judge import explicit_yes
from simulator.personas.model import Persona
from simulator.personas.phrase_bank import phrase_file
from simulator.personas.questions import classify

TODAY = date(2031, 3, 3)  # a Monday
MARGARET = {"first_name": "Margaret", "last_name": "Chen", "date_of_birth": "1948-03-14",
            "dob_style": "long"}

# What the agent says on the clinic's own call: the offline lines first, then the way a
# model or a person at the front desk might put it.
ASK_FOR_HER = [
    "Hello, this is Demo Family Clinic calling. May I speak with Margaret, please?",
    "Sorry, this is Demo Family Clinic. Am I speaking with Margaret?",
    "Hi there, it's Sam from Demo Family Clinic. Is this Margaret Chen?",
    "Good afternoon, is Mrs. Chen available?",
    "Hi, I'm trying to reach Margaret Chen. Is she there?",
    "Hello! Could I talk to Margaret, please?",
]
ASK_FOR_SOMEONE_ELSE = [
    "Hello, this is Demo Family Clinic calling. May I speak with Priya, please?",
    "Hi, is this Eleanor Kowalski?",
    "Good morning, is Mr. Walsh there?",
]
ASK_FOR_REQUESTER = [
    ("Hello, this is Demo Family Clinic, returning a call from this number. Are you the "
    "person who asked us to call back?"),
    "Hi, it's Demo Family Clinic. Did you ask us to call you back?",
]
ASK_BIRTH_DATE = [
    "Thank you. Before I go on, could you confirm your date of birth for me, please?",
    ("I just need to make sure I'm speaking with the right person before I go on. What's "
    "your date of birth?"),
    "Great, thanks. And can you tell me your date of birth, just to check?",
]
CALLING_BACK = [
    ("Thank you, Margaret. You asked us to call you back about your test results. How can "
    "I help?"),
    ("Thank you, Margaret. I'm calling from Demo Family Clinic about your test results. "
    "How can I help?"),
    "Thanks Margaret, I'm returning your call about your blood test. What can I do for you?",
]
OFFERS = [
    ("Thank you, Margaret. You're on our waitlist, and physiotherapy on Tuesday, March 11 "
    "at 2 PM has just opened up. Would you like me to book it for you?"),
    ("Great news: a cancellation means we have a physio slot on Tuesday at 2 PM. Would you "
    "like it?"),
    ("Thanks. A time has come up for your physiotherapy on Tuesday, March 11 at 2 PM. "
    "Shall I book it for you?"),
]
OFFER_AGAIN = "Would you like me to book physiotherapy on Tuesday at 2 PM for you? Please " \
              "say yes or no."
SLOT_GONE = [
    ("I'm sorry, someone else has just taken that time. You're still on the waitlist, and "
    "we'll call you when another time opens up. Is there anything else I can help with?"),
    ("Thank you, Margaret. We were calling about an opening for physiotherapy, but I'm "
    "sorry, it has just been taken. You're still on the waitlist. Is there anything else "
    "I can help with?"),
    "Oh, I'm sorry, that slot is no longer available. Is there anything else?",
]
REMINDERS = [
    ("Thank you, Margaret. I'm calling to remind you about your follow-up visit with Dr. "
    "Maya Patel at our Downtown clinic on Thursday, March 6 at 10 AM. Will you be able to "
    "make it?"),
    ("Will you be able to come to your follow-up visit with Dr. Maya Patel? If not, I can "
    "cancel it or move it for you."),
    ("Hi Margaret, just a reminder that you have a follow-up visit on Thursday at 10 AM. "
    "Can you still make it?"),
    ("This is a quick reminder about your appointment on Thursday at 10 AM. Are you still "
    "planning to come?"),
]
CANCEL_OR_MOVE = "No problem. Would you like to cancel it, or move it to another time?"
CANCEL_READ_BACK = "That's a follow-up visit on Thursday, March 6 at 10 AM. Do you want me " \
                   "to cancel it?"
ANYTHING_ELSE = "Is there anything else I can help you with?"
OPTED_OUT = "Of course. I've made a note that we won't call you again. Sorry to have " \
            "bothered you. Goodbye."
WRONG_NUMBER_BYE = "I'm sorry, I must have the wrong number. Sorry to have bothered you. " \
                   "Goodbye."


def callee(goal: dict, *more: dict, caller: dict | None = None, **fields) -> RuleCaller:
    outcomes = {"take_callback": "callback_returned", "accept_offer": "booked",
                "decline_offer": "offer_declined", "confirm_reminder": "confirmed",
                "cancel_reminder": "cancelled", "move_reminder": "rescheduled",
                "opt_out": "opted_out", "wrong_person": "wrong_person", "checkin": "checked_in"}
    data = {
        "name": "callee", "direction": "outbound", "to": "+15550100201",
        "caller": caller or MARGARET, "tasks": [goal, *more],
        "expect": {"outcome": [outcomes[goal["kind"]], *("booked" for _ in more)]},
    }
    data.update(fields)
    return RuleCaller(Persona.model_validate(data), today=lambda: TODAY)


def confirmed(rules: RuleCaller) -> RuleCaller:
    """The callee said it is them and gave their date of birth."""
    rules.respond([ASK_FOR_HER[0]])
    rules.respond([ASK_BIRTH_DATE[0]])
    return rules


# --- Who is on the line -----------------------------------------------------------------


@pytest.mark.parametrize("asked", ASK_FOR_HER)
def test_asked_for_by_their_name_they_say_it_is_them(asked):
    answer = callee({"kind": "take_callback"}).respond([asked])

    assert answer in ("Speaking.", "Yes, that's me.", "Yes, it's me.", "This is Margaret.",
                      "Yes, Margaret speaking.")


@pytest.mark.parametrize("asked", ASK_FOR_SOMEONE_ELSE)
def test_asked_for_someone_else_they_say_that_person_is_not_here(asked):
    answer = callee({"kind": "confirm_reminder"}).respond([asked])

    assert answer.startswith(("Sorry, there's no", "I think you've got the wrong number"))
    assert "Margaret" not in answer


@pytest.mark.parametrize("asked", ASK_FOR_REQUESTER)
def test_a_callee_who_asked_for_the_call_says_so(asked):
    rules = callee({"kind": "take_callback"}, caller={**MARGARET, "new": True})

    assert rules.respond([asked]) in ("Yes, that was me.", "Yes, it was me who called.",
                                      "Yes, that's me.")


@pytest.mark.parametrize("asked", ASK_BIRTH_DATE)
def test_asked_for_their_date_of_birth_they_give_it(asked):
    rules = callee({"kind": "take_callback"})
    rules.respond([ASK_FOR_HER[0]])

    assert "March 14th, 1948" in rules.respond([asked])


def test_the_phone_answered_before_the_clinic_speaks_says_hello():
    assert callee({"kind": "take_callback"}).respond([]) in (
        "Hello?", "Hello, who's calling?", "Hi, hello?")


# --- A callback ----------------------------------------------------------------------------


@pytest.mark.parametrize("told", CALLING_BACK)
def test_hearing_why_the_clinic_called_back_they_ask_for_what_they_want_next(told):
    rules = confirmed(callee({"kind": "take_callback"},
                             {"kind": "book", "service": "a flu shot"}))

    answer = rules.respond([told])

    assert "flu shot" in answer and not rules.finished
    assert rules.task.kind == "book"
    picked = rules.respond(["I have Monday, March 10 at 9 AM. Which would you like?"])
    assert "Monday" in picked or "first" in picked
    assert explicit_yes(rules.respond([("Just to confirm: Flu shot on Monday, March 10 at 9 AM. "
                                       "Shall I book that?")]))


@pytest.mark.parametrize("told", CALLING_BACK)
def test_a_callee_who_wanted_only_the_call_back_thanks_them_and_goes(told):
    rules = confirmed(callee({"kind": "take_callback"}))

    answer = rules.respond([told])

    assert "thank" in answer.lower() and "bye" in answer.lower()
    assert rules.finished and rules.progress.done == [True]


def test_a_callback_that_asks_straight_away_is_answered_as_asked():
    rules = confirmed(callee({"kind": "take_callback"},
                             {"kind": "book", "service": "a follow-up", "prefer": {
                                 "day": "tuesday"}}))

    answer = rules.respond([("Thanks Margaret, I'm calling back about your results: the doctor "
                            "would like to see you. What day suits you?")])

    assert answer in ("Tuesday would be best.", "Tuesday, please.", "Could we do Tuesday?")


# --- A waitlisted slot -------------------------------------------------------------------------


@pytest.mark.parametrize("offer", [*OFFERS, OFFER_AGAIN])
def test_offered_the_waitlisted_slot_they_take_it_with_an_explicit_yes(offer):
    rules = confirmed(callee({"kind": "accept_offer"}))

    answer = rules.respond([offer])

    assert explicit_yes(answer), answer
    assert rules.progress.done == [True]
    assert "bye" in rules.respond(["You're booked. " + ANYTHING_ELSE]).lower()
    assert rules.finished


@pytest.mark.parametrize("offer", [*OFFERS, OFFER_AGAIN])
def test_offered_the_waitlisted_slot_they_turn_it_down(offer):
    rules = confirmed(callee({"kind": "decline_offer"}))

    answer = rules.respond([offer])

    assert answer.startswith("No") and not explicit_yes(answer)
    kept = rules.respond([("No problem, I'll keep you on the waitlist, and we'll call you if "
                          "another time opens up. Is there anything else I can help with?")])
    assert "bye" in kept.lower() and rules.finished


@pytest.mark.parametrize("gone", SLOT_GONE)
def test_told_the_slot_has_gone_they_accept_it_and_say_goodbye(gone):
    rules = confirmed(callee({"kind": "accept_offer"}))
    rules.respond([OFFERS[0]])

    answer = rules.respond([gone])

    assert "bye" in answer.lower() and rules.finished


# --- A reminder ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reminder", REMINDERS)
def test_reminded_of_an_appointment_they_say_they_will_be_there(reminder):
    rules = confirmed(callee({"kind": "confirm_reminder"}))

    answer = rules.respond([reminder])

    assert explicit_yes(answer) and rules.progress.done == [True]
    bye = rules.respond([("Lovely. Confirmed the Follow-up visit with Dr. Maya Patel on "
                         "Thursday at 10 AM. We'll see you then.")])
    assert "bye" in bye.lower() and rules.finished


@pytest.mark.parametrize("reminder", REMINDERS)
def test_reminded_of_an_appointment_they_cannot_make_they_cancel_it_at_the_read_back(reminder):
    rules = confirmed(callee({"kind": "cancel_reminder"}))

    answer = rules.respond([reminder])

    assert answer.startswith("No") and "cancel" in answer.lower()
    assert rules.progress.done == [False]  # nothing is cancelled until the read-back
    assert "cancel" in rules.respond([CANCEL_OR_MOVE]).lower()
    assert explicit_yes(rules.respond([CANCEL_READ_BACK]))
    assert rules.progress.done == [True]


@pytest.mark.parametrize("reminder", REMINDERS)
def test_reminded_of_an_appointment_they_cannot_make_they_move_it(reminder):
    rules = confirmed(callee({"kind": "move_reminder", "prefer": {"part_of_day": "afternoon"}}))

    answer = rules.respond([reminder])

    assert answer.startswith(("No", "Not")) and mentions_moving(answer)
    assert mentions_moving(rules.respond([CANCEL_OR_MOVE]))
    rules.respond(["Sure. What day or time would suit you?"])
    picked = rules.respond([("I have Monday, March 10 at 9 AM or Tuesday, March 11 at 2 PM. "
                            "Which would you like?")])
    assert "Tuesday" in picked or "second" in picked
    assert explicit_yes(rules.respond([("Just to confirm: move it to Tuesday, March 11 at 2 PM. "
                                       "Shall I move it?")]))
    assert rules.progress.done == [True]


def mentions_moving(said: str) -> bool:
    return "move" in said.lower() or "change" in said.lower()


# --- "Please don't call me again" --------------------------------------------------------------


def test_a_callee_who_opts_out_at_once_says_so_to_the_first_question():
    rules = callee({"kind": "opt_out", "say_at": 1})

    answer = rules.respond([ASK_FOR_HER[0]])

    assert answer in phrase_file().lines["opt_out"].plain
    assert rules.respond([OPTED_OUT]) in ("Bye.", "Thanks, bye.", "Okay, bye.")
    assert rules.finished


def test_a_callee_who_opts_out_later_first_says_who_they_are():
    rules = callee({"kind": "opt_out", "say_at": 3,
                    "words": "I'm fine, but please stop phoning me."})

    said = [rules.respond([ASK_FOR_HER[0]]), rules.respond([ASK_BIRTH_DATE[0]]),
            rules.respond([REMINDERS[0]])]

    assert "March 14th, 1948" in said[1]
    assert said[2] == "I'm fine, but please stop phoning me."


def test_a_callee_the_clinic_keeps_talking_to_after_opting_out_says_it_once_more_and_hangs_up():
    rules = callee({"kind": "opt_out", "say_at": 1})
    rules.respond([ASK_FOR_HER[0]])

    again = rules.respond(["I understand. But before you go, can I book your follow-up?"])

    assert "don't call me again" in again and rules.finished
    assert rules.respond(["Hello?"]) is None


def test_the_opt_out_phrasings_are_many_and_all_different():
    said = phrase_file().lines["opt_out"]
    lines = said.plain + said.terse + said.rambling

    assert len(set(lines)) == len(lines) >= 8


# --- The wrong person ---------------------------------------------------------------------------


@pytest.mark.parametrize("asked", ASK_FOR_HER)
def test_the_wrong_person_says_the_clinic_has_the_wrong_number(asked):
    rules = callee({"kind": "wrong_person"},
                   caller={"first_name": "Frank", "last_name": "Dobbs",
                           "date_of_birth": "1970-02-11"})

    answer = rules.respond([asked])

    bank = phrase_file().lines
    name = classify(asked, outbound=True).asked_for
    assert answer in bank["wrong_person"].plain + [
        line.format(asked=name) for line in bank["wrong_person_named"].plain]
    assert rules.respond([WRONG_NUMBER_BYE]) in ("Bye.", "Thanks, bye.", "Okay, bye.")


def test_the_wrong_person_asked_on_says_it_again_then_hangs_up():
    rules = callee({"kind": "wrong_person", "words": "She moved out last year."},
                   caller={"first_name": "Joan", "last_name": "Pike",
                           "date_of_birth": "1966-10-03"})

    first = rules.respond([ASK_FOR_HER[0]])
    second = rules.respond([ASK_BIRTH_DATE[0]])
    third = rules.respond(["Could you confirm your date of birth again?"])

    assert first == "She moved out last year."
    assert "wrong number" in second or "no one here" in second
    assert third is None


# --- A check-in ------------------------------------------------------------------------------------


def test_a_check_in_call_is_a_chat_that_winds_down_and_says_goodbye():
    rules = confirmed(callee({"kind": "checkin", "words": "Oh, I'm doing well, thank you."}))

    said = [rules.respond([turn]) for turn in (
        ("Thank you, Margaret. It's your check-in call from Demo Family Clinic. How are you "
        "doing today?"),
        ('Last time we spoke, you told me: "My granddaughter Lily has her piano recital on '
        'Saturday." How has that been?'),
        ("Before I forget, a reminder from the team: Take your blood pressure reading each "
        "morning. Have you done that?"),
        "Wonderful, I've made a note that it's done.",
        "Thank you for telling me. What else has been happening?",
        "I'm listening. Tell me more about how things have been.",
        "It was lovely to catch up. Your reminder is done and I've made a note of what you "
        "told me for next time. Is there anything else before we say goodbye?",
    )]

    assert said[0] == "Oh, I'm doing well, thank you."
    assert said[2].startswith("Yes")
    assert said[3] in ("Mm, yes.", "That's good.", "Oh, good.")
    assert "let you go" in said[5]
    assert "bye" in said[6].lower() and rules.finished and rules.progress.done == [True]


# --- Goodbyes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("goodbye", [
    "Thank you for your time. Goodbye.",
    "No problem, we'll try another time. You can reach us on 555 010 0100. Thank you, goodbye.",
    ("I'm sorry, I can't go on without confirming who I'm speaking with. You can reach us on "
    "555 010 0100. Goodbye."),
    "Alright, have a lovely day. Bye for now.",
])
def test_the_clinics_goodbye_ends_the_call(goodbye):
    rules = callee({"kind": "take_callback"})
    rules.respond([ASK_FOR_HER[0]])

    assert rules.respond([goodbye]) in ("Bye.", "Thanks, bye.", "Okay, bye.")
    assert rules.finished


# --- As the Twilio stand-in plays it ---------------------------------------------------------


async def silent_voice(text: str, sample_rate: int) -> bytes:
    return b"\x00\x00" * 160


async def test_a_person_callee_named_by_an_outbound_persona_file_answers_the_clinics_call():
    person = parse_callee("person:scenarios/personas/outbound/reminder_confirms.yaml",
                          synthesize=silent_voice)
    caller = await person.caller()
    agent_says = [ASK_FOR_HER[0], ASK_BIRTH_DATE[0], REMINDERS[0],
                  "Lovely. Confirmed the Follow-up visit. We'll see you then."]

    said = [(await caller.next_line(number, [turn])).text
            for number, turn in enumerate(agent_says, 1)]

    assert person.name == "reminder_confirms"
    assert "March" in said[1] and ("1948" in said[1] or "forty-eight" in said[1])
    assert "I'll be there" in said[2] and "bye" in said[3].lower()
    assert caller.next_cue() is None  # said goodbye: only waits to hang up
