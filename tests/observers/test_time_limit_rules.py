"""The time limit's rules: the graph's policy made more careful by the call, and how a
caller answers the call-back offer."""

import pytest

from processors.conversation.time_limit import offer_answers, time_limit_step


@pytest.mark.parametrize(("policy", "escalated", "can_transfer", "step"), [
    ("end", False, False, "end"),
    ("end", False, True, "end"),
    ("end", True, False, "escalate"),  # never hang up on a call that raised a concern
    ("end", True, True, "transfer"),
    ("offer_callback", False, True, "offer_callback"),
    ("offer_callback", True, False, "escalate"),
    ("escalate", False, False, "escalate"),
    ("escalate", False, True, "transfer"),
])
def test_the_step_at_the_limit(policy, escalated, can_transfer, step):
    assert time_limit_step(policy, escalated=escalated, can_transfer=can_transfer) == step


@pytest.mark.parametrize("reply", [
    "yes", "Yes please.", "yeah go on then?", "sure, that's fine", "OK",
    "can someone call me back tomorrow", "could you ring me back later on please",
    "yes, call back after lunch would be great", "another day would be better honestly",
])
def test_replies_that_take_the_call_back(reply):
    assert offer_answers().answer(reply) == "accepted"


@pytest.mark.parametrize("reply", [
    "no", "No thank you", "nope", "not really", "let's just carry on",
    "no, I'd rather finish it now", "we're almost done, keep going",
    "no need to call me back", "I'd like to continue please",
])
def test_replies_that_carry_on(reply):
    assert offer_answers().answer(reply) == "declined"


@pytest.mark.parametrize("reply", [
    "so what times do you have on Thursday",
    "okay and the appointment is with Doctor Patel right",  # long: their request goes on
    "I don't know", "hmm", "what was that",
    "my chest has been hurting since this morning",
])
def test_anything_else_is_the_conversation_going_on(reply):
    assert offer_answers().answer(reply) == "not_answered"
