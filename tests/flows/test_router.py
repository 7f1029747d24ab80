"""The deterministic router sends each caller turn where seed 002's rules say, with its evidence."""

import pytest
import yaml
from pydantic import ValidationError

from flows.router import Confidence, RouterRules, TaskKind, route_turn


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
    ],
)
def test_caller_words_pick_the_route_and_task(said, route, task):
    decision = route_turn(said)
    assert (decision.route, decision.task) == (route, task)


def test_a_decision_carries_the_evidence_seed_002_shows():
    decision = route_turn("I'd like to cancel please")
    assert decision.label == "cancel_request/high"
    assert decision.evidence == ("cancel_terms",)
    assert route_turn("mmm").label == "unknown/low"
    assert route_turn("mmm").evidence == ("no_rule_matched",)


def test_what_the_agent_just_asked_is_evidence_too():
    after_readback = route_turn("yes that's right", last_action="final_slot_confirmation")
    assert after_readback.route == "confirmation"
    assert after_readback.evidence == ("final_confirmation_prompt",)
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
