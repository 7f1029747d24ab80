"""The deterministic router sends each caller turn where its rules say, with its evidence."""

import pytest
import yaml
from pydantic import ValidationError

from flows.router import Confidence, RouterRules, TaskKind, requests_in_order, route_turn


@pytest.mark.parametrize(
    ("said", "route", "task"),
    [
        ("Hi, I'd like to book an appointment please", "booking_request", TaskKind.BOOK),
        ("Do you have anything available on Friday?", "availability_request", TaskKind.BOOK),
        ("I need to cancel my appointment", "cancel_request", TaskKind.CANCEL),
        ("Please cancel all my appointments", "cancel_all_request", TaskKind.CANCEL),
        ("Can I move my appointment to next week?", "reschedule_request", TaskKind.RESCHEDULE),
        ("When is my appointment?", "query_request", TaskKind.QUERY),
        ("Can someone call me back later", "callback_request", TaskKind.HANDOFF),
        ("I want to talk to a real person", "human_request", TaskKind.HANDOFF),
        ("How much does an initial consult cost?", "price_question", None),
        ("What are your opening hours?", "hours_question", None),
        ("It's for my daughter actually", "shared_phone", TaskKind.HANDOFF),
        ("No that's all, goodbye", "closing", None),
        ("I have chest pain and I can't breathe", "red_flag", TaskKind.HANDOFF),
        ("some days I want to end it all", "crisis", TaskKind.HANDOFF),
    ],
)
def test_caller_words_pick_the_route_and_task(said, route, task):
    decision = route_turn(said)
    assert (decision.route, decision.task) == (route, task)


@pytest.mark.parametrize(
    ("said", "route"),
    [
        ("What time does Northside open on Saturday?", "hours_question"),
        ("Is the lake avenue clinic open now?", "hours_question"),
        ("are you guys closed on the 24th?", "hours_question"),
        ("How late is the downtown office open tonight?", "hours_question"),
        ("when does Downtown close on Fridays", "hours_question"),
        ("Where's your downtown office?", "address_question"),
        ("what's the address of the northside clinic", "address_question"),
        ("where are you located?", "address_question"),
        ("How do I get to the Lake Avenue clinic?", "address_question"),
    ],
)
def test_questions_about_hours_and_places_are_side_questions(said, route):
    assert route_turn(said).route == route


@pytest.mark.parametrize("said", [
    "Is there anything open on Friday?", "what time slots are open on friday",
    "Where is my appointment?", "is Friday open for a physical? I.d like to book one",
])
def test_the_same_words_asking_for_an_appointment_or_about_their_own_are_not(said):
    assert route_turn(said).route not in ("hours_question", "address_question")


def test_a_decision_carries_its_evidence():
    decision = route_turn("I'd like to cancel please")
    assert decision.label == "cancel_request/high"
    assert decision.evidence == ("cancel_terms",)
    assert route_turn("mmm").label == "unknown/low"
    assert route_turn("mmm").evidence == ("no_rule_matched",)


def test_what_the_agent_just_asked_is_evidence_too():
    after_readback = route_turn("yes that's right", last_action="final_slot_confirmation")
    assert after_readback.route == "confirmation"
    assert after_readback.evidence == ("final_confirmation_prompt", "yes_no_terms")
    leaving = route_turn("you know what, I'll sort it out some other time, bye",
                         last_action="final_slot_confirmation")
    assert leaving.route == "closing"
    choice = route_turn("the first one", last_action="propose_initial_slot")
    assert choice.route == "slot_choice"
    assert choice.evidence == ("two_slot_choice_prompt", "slot_choice_terms")
    unsure = route_turn("hmm let me think", last_action="propose_initial_slot")
    assert unsure.label == "ambiguous/medium"


def test_higher_confidence_wins_over_a_vaguer_match():
    # "book" (medium) and "cancel" (high) both fire: the cancel is what the caller wants
    assert route_turn("cancel my booking").route == "cancel_request"
    # a time alone is a time preference; with a booking request it is part of the booking
    assert route_turn("tuesday morning").route == "alternate_time"
    assert route_turn("book something tuesday morning").route == "booking_request"


def test_an_emergency_outranks_everything():
    decision = route_turn("I want to cancel, my husband is unconscious")
    assert decision.route == "red_flag" and decision.confidence is Confidence.HIGH


def test_rules_naming_unknown_term_lists_are_rejected():
    data = yaml.safe_load(
        "terms: {a: [x]}\nrules: [{route: r, confidence: high, terms: [b]}]"
    )
    with pytest.raises(ValidationError, match="unknown term lists"):
        RouterRules.model_validate(data)


@pytest.mark.parametrize(
    "said",
    ["I can't make my physio on Tuesday, could you take it off?",
     "I won't be coming in on Friday after all",
     "please scrap my appointment, I'm feeling better",
     "I'm not going to make it to tomorrow's one",
     "I don't need it any more, my knee's fine"],
)
def test_cancelling_without_saying_cancel(said):
    assert route_turn(said).task is TaskKind.CANCEL


# Answering "Will you be able to make it?" after an appointment reminder.
MOVE_WISHES = [
    "No, I can't make that time. Could I move it to another day?",
    "I need to change it",
    "can we push it back a week",
    "can't do Tuesday, any other day?",
    "I can't make it, can we do another day?",
    "I can't make that time, is there anything later?",
    "No, that doesn't work, can I come another day?",
]
CANCELLATIONS = [
    "No, I can't make it. Please cancel it.",
    "I can't make it",
    "Cancel it please.",
    "I won't be coming, you can cancel it",
    "I'm not going to make it, please take it off",
]


@pytest.mark.parametrize("said", MOVE_WISHES)
def test_a_wish_to_move_wins_over_not_being_able_to_make_it(said):
    decision = route_turn(said, last_action="read_reminder")
    assert (decision.route, decision.task) == ("reschedule_request", TaskKind.RESCHEDULE)
    assert requests_in_order(said, "read_reminder") == [said]  # one request: the move


@pytest.mark.parametrize("said", CANCELLATIONS)
def test_a_cancellation_after_a_reminder_is_still_a_cancellation(said):
    assert route_turn(said, last_action="read_reminder").task is TaskKind.CANCEL
    assert route_turn(said).task is TaskKind.CANCEL


def test_cannot_come_and_another_time_is_a_move_anywhere_but_another_time_alone_is_not():
    assert route_turn("I can't make it, can we do another day?").task is TaskKind.RESCHEDULE
    # booking with no appointment of theirs: "any other day?" is a time preference
    assert route_turn("can't do Tuesday, any other day?").task is None


def test_cancelling_one_and_moving_another_are_still_two_requests():
    said = "Cancel my physio on Tuesday. And move my checkup to next week."
    assert len(requests_in_order(said)) == 2


@pytest.mark.parametrize(
    "said",
    ["when am I next in?", "what have I got coming up?", "remind me when I'm due in",
     "have I got anything booked?", "when's my next one"],
)
def test_asking_about_their_own_bookings_casually(said):
    assert route_turn(said).task is TaskKind.QUERY


@pytest.mark.parametrize(
    "said",
    ["right, I'd better let you get on", "night then", "I'm getting off the phone now",
     "lovely talking to you, take care", "that's all I needed, thanks for your help",
     "okay, bye bye", "goodbye and thanks for everything"],
)
def test_everyday_closings(said):
    assert route_turn(said).route == "closing"


@pytest.mark.parametrize(
    "said",
    ["My husband died last week and I never got to say goodbye. It's about his appointment.",
     "she said goodbye to me at the hospital, it was so hard",
     "our wedding song was Goodbye My Lover",
     "I need to take care of my mum, can I book her in",
     "bye, but first I need to ask about my husband's bill"],
)
def test_goodbye_in_another_sense_does_not_end_the_call(said):
    assert route_turn(said).route != "closing"


def test_a_farewell_because_they_mean_to_harm_themselves_is_a_crisis_not_a_goodbye():
    decision = route_turn("I just wanted to say this is goodbye, I won't be around much longer")
    assert decision.route == "crisis" and decision.task is TaskKind.HANDOFF


@pytest.mark.parametrize("said", [
    "Please don't call me again.",
    "Take me off your list.",
    "Could you take me off your calling list?",
    "Stop calling me!",
    "just stop calling.",
    "please stop phoning me",
    "quit ringing me",
    "Can you remove my number please",
    "lose my number",
    "I don't want any more calls from you",
    "I don't want you to call me again.",
    "Never call this number again",
    "do not contact me again",
    "Put me on your do not call list",
    "no more calls, thanks",
    "Yes I'll come, but stop calling me with these reminders",
    "unsubscribe",
])
def test_please_do_not_call_me_again_is_heard_in_its_paraphrases_anywhere(said):
    for after in (None, "ask_for_callee", "final_slot_confirmation", "offer_waitlist_slot",
                  "read_reminder", "confirm_current_booking_cancellation"):
        assert route_turn(said, after).route == "do_not_call", (said, after)


@pytest.mark.parametrize(("said", "route"), [
    ("Don't call me back, I'll ring you tomorrow", "callback_request"),
    ("Please don't call me before ten", "unknown"),
    ("Take me off the Tuesday appointment", "cancel_request"),
    ("Can you remove my number from the file, I have a new one", "unknown"),
    ("I need to cancel my appointment", "cancel_request"),
])
def test_words_that_only_sound_like_do_not_call_are_not(said, route):
    assert route_turn(said).route == route


@pytest.mark.parametrize(("said", "route"), [
    ("Yes, speaking.", "callee_speaking"),
    ("This is she.", "callee_speaking"),
    ("Sorry, wrong number.", "wrong_number"),
    ("There's no Margaret here", "wrong_number"),
    ("No one here by that name.", "wrong_number"),
    ("She's not here right now.", "callee_unavailable"),
    ("He's at work, can I take a message?", "callee_unavailable"),
    ("This is her husband.", "callee_unavailable"),
])
def test_answers_to_may_i_speak_with_are_read_only_after_that_question(said, route):
    assert route_turn(said, "ask_for_callee").route == route
    assert route_turn(said, "ask_how_can_help").route != route


@pytest.mark.parametrize("said", [
    "Has my deposit gone through yet?",
    "did you get my payment?",
    "Could you check if you got my payment now?",
    "Is the deposit paid?",
    "I just paid the deposit, can you check?",
    "was my payment received ok",
    "Can you tell me if the payment went through",
    "has the clinic received the deposit",
])
def test_asking_whether_a_deposit_is_paid(said):
    assert route_turn(said).route == "payment_status_question"


@pytest.mark.parametrize("said", [
    "how much is the deposit",
    "I want to pay my deposit by card",
    "Do I need to pay a deposit?",
])
def test_asking_about_a_deposit_is_not_asking_whether_it_is_paid(said):
    assert route_turn(said).route != "payment_status_question"
